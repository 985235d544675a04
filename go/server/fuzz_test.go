package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
)

// decodeBytes decodes a whole body with the limits of lim and a budget large enough for any test body.
func decodeBytes(data []byte, lim limits) (*forecastRequest, error) {
	d, err := newDecoder(bytes.NewReader(data), newByteBudget(1<<30).open(), lim)
	if err != nil {
		return nil, err
	}
	req, err := decodeForecast(d)
	if err != nil {
		return nil, decodeError(err)
	}
	return req, nil
}

// FuzzDecodeForecast feeds arbitrary bodies to the request decoder and validator (what runs on a request
// before the model): they must never panic, refuse only with a 400 apiError, and a request they accept must
// respect every limit (CI runs it briefly: scripts/test.sh).
func FuzzDecodeForecast(f *testing.F) {
	for _, s := range []string{
		`{"horizon": 4, "series": [{"values": [1, 2, 3]}]}`,
		`{"horizon": 3, "quantiles": [0.1, 0.5], "series": [{"id": "x", "values": [1, null, 3], "timestamps": ["2020-01", "2020-02", "2020-03"]}]}`,
		`{"horizon": 2, "series": [{"values": [1, 2], "group": 1, "covariates": [{"past": [1, 2], "future": [3]}]}, {"values": [3, 4], "group": 1}]}`,
		`{"horizon": 2, "series": [{"values": [1, 2], "covariates": [{"past_labels": ["a", null], "future_labels": ["b"]}]}]}`,
		`{"horizon": 5, "series": [{"values": [1, 2], "timestamps": ["2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z"]}]}`,
		`{"horizon": 1000000000, "series": [{"values": [1, 2], "timestamps": ["2020-01-01", "2020-01-02"]}]}`,
		`{"horizon": 4, "series": [{"values": [1e39]}]}`,
		`{"horizon": 4, "horizon": 5, "series": []}`,
		`[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]`,
		`{"horizon": 4, "series": [{"values": [1]}]}}`,
	} {
		f.Add([]byte(s))
	}
	lim := limits{MaxSeries: 64, MaxSeriesLen: 4096, MaxCovariates: 8, MaxQuantiles: 99, MaxHorizon: 4096,
		ModelMaxHorizon: 65536, MaxOutputValues: 1 << 16, MaxInputValues: 1 << 16, MaxGroupRows: 32}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeBytes(data, lim)
		if err == nil {
			err = rejectKronosFields(req, "chronos2")
		}
		if err == nil {
			err = req.validate(context.Background(), lim)
		}
		if err == nil {
			err = req.timestamps(context.Background())
		}
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Message == "" {
				t.Fatalf("refusal %v is not a 400 apiError", err)
			}
			return
		}
		if req.Horizon < 1 || req.Horizon > lim.MaxHorizon || len(req.Series) == 0 || len(req.Series) > lim.MaxSeries {
			t.Fatalf("accepted out of limits: horizon %d, %d series", req.Horizon, len(req.Series))
		}
		if len(req.future) != len(req.Series) {
			t.Fatalf("%d future stamp lists for %d series", len(req.future), len(req.Series))
		}
		for i, fut := range req.future {
			if fut != nil && len(fut) != req.Horizon {
				t.Fatalf("series %d: %d future stamps for horizon %d", i, len(fut), req.Horizon)
			}
		}
		b := toBinding(req)
		_ = batchKey(b, 512)
		if len(b.Series) != len(req.Series) {
			t.Fatalf("binding lost series")
		}
	})
}

// FuzzDecodeImageRequest feeds arbitrary bodies to the image request decoder and its checks (what runs before the
// library sees a request): they must never panic, refuse only with a 400 apiError naming something, and a request
// they accept must respect every limit.
func FuzzDecodeImageRequest(f *testing.F) {
	for _, s := range []string{
		`{"prompt": "a lighthouse", "size": "1024x1024", "n": 2, "seed": 7}`,
		`{"prompt": "x", "width": 512, "height": 768, "num_inference_steps": 8, "guidance_scale": 0, "negative_prompt": "blur"}`,
		`{"prompt": "x", "lora": "auto", "lora_max": 2, "lora_min_score": 0.2, "lora_scale": 0.5}`,
		`{"prompt": "x", "lora": ["a", {"name": "b", "scale": 0.3}], "stream": true, "stream_options": {"include_progress": true}}`,
		`{"prompt": "x", "lora": null, "response_format": "b64_json", "output_format": "png", "quality": "hd", "user": null}`,
		`{"prompt": "x", "size": "100000x100000"}`,
		`{"prompt": "x", "size": "-16x16"}`,
		`{"prompt": "x", "n": 1e9}`,
		`{"prompt": "x", "lora": [[]]}`,
		`{"prompt": "x", "lora": {"name": ""}}`,
	} {
		f.Add([]byte(s))
	}
	s := &Server{cfg: Config{MaxImages: 4, MaxImagePixels: 2048 * 2048, MaxImageSteps: 100, MaxLoRAs: 3}}
	m := &servedModel{name: "zimage"}
	m.info.ImageSizeMultiple, m.info.DefaultSteps = 16, 8
	lim := limits{MaxSeries: 64, MaxSeriesLen: 4096, MaxHorizon: 4096}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := newDecoder(bytes.NewReader(data), newByteBudget(1<<30).open(), lim)
		if err != nil {
			t.Fatal(err)
		}
		req, err := decodeImageRequest(d, s.cfg.MaxLoRAs)
		if err != nil {
			err = decodeError(err)
		} else if e := s.checkImageRequest(m, req, len(data)%2 == 0); e != nil {
			err = e
		}
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Message == "" {
				t.Fatalf("refusal %v is not a 400 apiError", err)
			}
			return
		}
		if req.N < 1 || req.N > 4 || req.Width < 16 || req.Height < 16 || req.Width%16 != 0 || req.Height%16 != 0 ||
			int64(req.Width)*int64(req.Height) > 2048*2048 || req.Steps < 0 || req.Steps > 100 {
			t.Fatalf("accepted out of limits: %+v", req)
		}
		if req.Guidance != nil && !(*req.Guidance >= 0 && *req.Guidance <= 100) {
			t.Fatalf("guidance %v accepted", *req.Guidance)
		}
		if req.LoRA != nil && len(req.LoRA.items) > 3 {
			t.Fatalf("%d adapters accepted", len(req.LoRA.items))
		}
		if w := imageWork(m, req.Width, req.Height, max(req.Steps, 1), req.N, req.Guidance != nil && *req.Guidance > 0); w.passes < 1 || w.units < w.passes {
			t.Fatalf("work %+v", w)
		}
	})
}
