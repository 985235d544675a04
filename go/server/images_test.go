package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/testenv"
)

// The image endpoint on the tiny Z-Image fixture (tests/fixtures/zimage/tiny_a) with a catalog whose entries are
// the LoRA fixtures made with the reference tools (tests/fixtures/zimage/lora), routed by wordEmbedder.

var zimageLoRADir = filepath.Join("..", "..", "tests", "fixtures", "zimage", "lora")

const imageCatalog = `{"negative_weight": 0.5, "threshold": 0.3, "loras": [
  {"name": "fantasy", "path": "peft_attn.safetensors", "scale": 0.8,
   "positive": "knight castle dragon wizard armour", "negative": "robot spaceship", "triggers": ["knight"]},
  {"name": "cyberpunk", "path": "kohya_alpha.safetensors", "scale": 0.9,
   "positive": "neon city robot rain hacker", "negative": "castle"},
  {"name": "watercolor", "path": "aitk_bf16.safetensors", "scale": 0.7,
   "positive": "watercolour paper washes pigment"}]}`

// imageFixture is a server with the tiny image model and the catalog's adapters, and the same model opened apart
// through the binding (the reference the server's images must equal).
type imageFixture struct {
	*testServer
	ref      *cutenative.Model
	adapters map[string]*cutenative.Adapter // the catalog's files, loaded on ref
}

func startImages(t *testing.T, cfg Config) *imageFixture {
	t.Helper()
	dir := testenv.ZImagePipeline(t, filepath.Join("..", "..", "tests", "fixtures", "zimage", "tiny_a"))
	loraDir, err := filepath.Abs(zimageLoRADir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Models = map[string]string{"zimage": dir}
	if cfg.LoRACatalog == "" {
		cfg.LoRACatalog = writeCatalog(t, imageCatalog)
	}
	if cfg.LoRADir == "" {
		cfg.LoRADir = loraDir
	}
	cfg.Embedder = wordEmbedder{dim: 128}
	ts := start(t, cfg)
	ref, err := cutenative.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	f := &imageFixture{testServer: ts, ref: ref, adapters: map[string]*cutenative.Adapter{}}
	for name, file := range map[string]string{"fantasy": "peft_attn", "cyberpunk": "kohya_alpha", "watercolor": "aitk_bf16"} {
		a, err := ref.LoadAdapter(filepath.Join(loraDir, file+".safetensors"), &cutenative.AdapterOptions{AllowedDir: loraDir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		f.adapters[name] = a
	}
	return f
}

// do sends an image request; header pairs follow the body.
func (ts *testServer) image(t *testing.T, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.http.URL+"/v1/images/generations", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// imageAnswer is the JSON answer, decoded.
type imageAnswer struct {
	Created      int64  `json:"created"`
	OutputFormat string `json:"output_format"`
	Size         string `json:"size"`
	Data         []struct {
		B64JSON string `json:"b64_json"`
		Seed    int64  `json:"seed"`
	} `json:"data"`
	Cutenative struct {
		Model string  `json:"model"`
		Steps int     `json:"steps"`
		Seeds []int64 `json:"seeds"`
		LoRA  struct {
			Mode     string `json:"mode"`
			Decision string `json:"decision"`
			Applied  []struct {
				Name  string  `json:"name"`
				Scale float64 `json:"scale"`
			} `json:"applied"`
			Candidates []struct {
				Name  string  `json:"name"`
				Score float64 `json:"score"`
			} `json:"candidates"`
			Threshold *float64 `json:"threshold"`
		} `json:"lora"`
		Timings map[string]float64 `json:"timings_ms"`
	} `json:"cutenative"`
}

func (f *imageFixture) generate(t *testing.T, body string) (imageAnswer, []byte) {
	t.Helper()
	code, _, b := f.image(t, body)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	var a imageAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%v: %.300s", err, b)
	}
	return a, b
}

// rgb decodes a PNG into RGB8 bytes (the library's layout).
func rgb(t *testing.T, data []byte) *cutenative.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	pix := pixels4(img)
	if pix == nil {
		t.Fatalf("PNG decodes as %T", img)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	out := &cutenative.Image{Width: w, Height: h, Pix: make([]byte, 0, w*h*3)}
	for i := 0; i < len(pix); i += 4 {
		if pix[i+3] != 0xff {
			t.Fatal("the PNG is not opaque")
		}
		out.Pix = append(out.Pix, pix[i], pix[i+1], pix[i+2])
	}
	return out
}

// pixels4 is the 4-bytes-a-pixel storage of a decoded opaque PNG (RGBA and NRGBA agree when opaque); nil otherwise.
func pixels4(img image.Image) []byte {
	switch v := img.(type) {
	case *image.NRGBA:
		return v.Pix
	case *image.RGBA:
		return v.Pix
	}
	return nil
}

func b64png(t *testing.T, s string) *cutenative.Image {
	t.Helper()
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return rgb(t, data)
}

type use struct {
	name  string
	scale float32
}

// want is the binding's image for the request's parameters with the given adapters.
func (f *imageFixture) want(t *testing.T, prompt string, w, h, steps int, seed uint64, uses ...use) *cutenative.Image {
	t.Helper()
	req := &cutenative.GenerateRequest{Prompt: prompt, Width: w, Height: h, Steps: steps, Seed: seed}
	for _, u := range uses {
		req.Adapters = append(req.Adapters, cutenative.AdapterUse{Adapter: f.adapters[u.name], Scale: u.scale})
	}
	img, err := f.ref.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func sameImage(t *testing.T, what string, got, want *cutenative.Image) {
	t.Helper()
	if got.Width != want.Width || got.Height != want.Height || !bytes.Equal(got.Pix, want.Pix) {
		diff := 0
		for i := range min(len(got.Pix), len(want.Pix)) {
			if got.Pix[i] != want.Pix[i] {
				diff++
			}
		}
		t.Fatalf("%s: %dx%d image differs from the binding's %dx%d in %d of %d bytes", what, got.Width, got.Height,
			want.Width, want.Height, diff, len(want.Pix))
	}
}

// Each way of naming adapters, "auto" included, gives the binding's image with exactly those adapters.
func TestImagesLoRAEqualsBinding(t *testing.T) {
	f := startImages(t, Config{})
	const knight = "a knight and a dragon at the castle"
	plain := f.want(t, knight, 32, 48, 2, 7)
	for _, c := range []struct {
		name, prompt, lora string
		decision           string
		uses               []use
	}{
		{"absent is none", knight, ``, "none", nil},
		{"none", knight, `"lora": "none",`, "none", nil},
		{"null", knight, `"lora": null,`, "none", nil},
		{"name", knight, `"lora": "cyberpunk",`, "explicit", []use{{"cyberpunk", 0.9}}},
		{"name and scale", knight, `"lora": {"name": "cyberpunk", "scale": 0.5},`, "explicit", []use{{"cyberpunk", 0.5}}},
		{"lora_scale", knight, `"lora": "watercolor", "lora_scale": 1.25,`, "explicit", []use{{"watercolor", 1.25}}},
		{"list", knight, `"lora": ["fantasy", {"name": "watercolor", "scale": 0.3}],`, "explicit",
			[]use{{"fantasy", 0.8}, {"watercolor", 0.3}}},
		{"auto routes", knight, `"lora": "auto",`, "routed", []use{{"fantasy", 0.8}}},
		{"auto routes by meaning", "neon rain over a hacker city", `"lora": "auto",`, "routed", []use{{"cyberpunk", 0.9}}},
		{"auto abstains", "a bowl of soup", `"lora": "auto",`, "abstained", nil},
		{"auto with a threshold nobody reaches", knight, `"lora": "auto", "lora_min_score": 0.99,`, "abstained", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, body := f.generate(t, fmt.Sprintf(`{"prompt": %q, %s "size": "32x48", "num_inference_steps": 2, "seed": 7}`, c.prompt, c.lora))
			if len(a.Data) != 1 || a.Data[0].Seed != 7 || a.Size != "32x48" || a.OutputFormat != "png" || a.Cutenative.Model != "zimage" ||
				a.Cutenative.Steps != 2 {
				t.Fatalf("answer %.400s", body)
			}
			d := a.Cutenative.LoRA
			if d.Decision != c.decision || len(d.Applied) != len(c.uses) {
				t.Fatalf("decision %+v, want %s with %v", d, c.decision, c.uses)
			}
			for i, u := range c.uses {
				if d.Applied[i].Name != u.name || float32(d.Applied[i].Scale) != u.scale {
					t.Fatalf("applied %+v, want %v", d.Applied, c.uses)
				}
			}
			if d.Mode == "auto" && (len(d.Candidates) != 3 || d.Threshold == nil) {
				t.Fatalf("auto answers every candidate and the threshold: %+v", d)
			}
			for _, k := range []string{"queue", "route", "adapters", "text", "denoise", "decode", "encode", "total"} {
				if _, ok := a.Cutenative.Timings[k]; !ok {
					t.Fatalf("timings_ms lacks %q: %v", k, a.Cutenative.Timings)
				}
			}
			if a.Cutenative.Timings["denoise"] <= 0 || a.Cutenative.Timings["total"] < a.Cutenative.Timings["denoise"] {
				t.Fatalf("timings %v", a.Cutenative.Timings)
			}
			got := b64png(t, a.Data[0].B64JSON)
			want := plain
			if c.prompt != knight || len(c.uses) > 0 {
				want = f.want(t, c.prompt, 32, 48, 2, 7, c.uses...)
			}
			sameImage(t, c.name, got, want)
			if len(c.uses) > 0 && bytes.Equal(got.Pix, plain.Pix) {
				t.Fatal("the adapter changed nothing: the test would not see a missing adapter")
			}
		})
	}
}

// -batch-images: a request's n images come from one library call (one batch); each is its one-image call's with
// seed + i within one pixel level on >= 99.9 % of the values (the batched GEMMs may round rows differently), the
// seeds are echoed, and the progress and timings cover the call.
func TestImagesBatched(t *testing.T) {
	f := startImages(t, Config{BatchImages: true})
	a, _ := f.generate(t, `{"prompt": "a lighthouse", "n": 3, "size": "32x32", "num_inference_steps": 2, "seed": 40, "lora": "fantasy"}`)
	if len(a.Data) != 3 || a.Data[0].Seed != 40 || a.Data[2].Seed != 42 {
		t.Fatalf("seeds %+v", a.Cutenative.Seeds)
	}
	for i, d := range a.Data {
		got, want := b64png(t, d.B64JSON), f.want(t, "a lighthouse", 32, 32, 2, uint64(40+i), use{"fantasy", 0.8})
		if got.Width != want.Width || got.Height != want.Height || len(got.Pix) != len(want.Pix) {
			t.Fatalf("image %d: %dx%d", i, got.Width, got.Height)
		}
		off := 0
		for k := range got.Pix {
			if d := int(got.Pix[k]) - int(want.Pix[k]); d > 1 || d < -1 {
				off++
			}
		}
		if float64(off) > 0.001*float64(len(got.Pix)) {
			t.Fatalf("image %d: %d of %d values more than one level from the one-image call's", i, off, len(got.Pix))
		}
	}
	if a.Cutenative.Timings["denoise"] <= 0 || a.Cutenative.Timings["generate"] <= 0 {
		t.Fatalf("timings %+v", a.Cutenative.Timings)
	}
}

// n images use seeds seed..seed+n-1; Accept: image/png answers the PNG itself with the facts in a header.
func TestImagesSeedsAndPNG(t *testing.T) {
	f := startImages(t, Config{})
	a, body := f.generate(t, `{"prompt": "a lighthouse", "n": 2, "size": "32x32", "num_inference_steps": 1, "seed": 40, "lora": "fantasy"}`)
	if len(a.Data) != 2 || a.Data[0].Seed != 40 || a.Data[1].Seed != 41 {
		t.Fatalf("seeds %+v", a.Cutenative.Seeds)
	}
	// The answer written piece by piece is exactly api.ImagesResponse's encoding.
	var wire api.ImagesResponse
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wire); err != nil {
		t.Fatal(err)
	}
	if again, _ := json.Marshal(wire); !bytes.Equal(bytes.TrimSpace(body), again) {
		t.Fatalf("the answer is not api.ImagesResponse's encoding:\n%.300s\n%.300s", body, again)
	}
	for i, d := range a.Data {
		sameImage(t, fmt.Sprintf("image %d", i), b64png(t, d.B64JSON), f.want(t, "a lighthouse", 32, 32, 1, uint64(40+i), use{"fantasy", 0.8}))
	}
	code, h, body := f.image(t, `{"prompt": "a lighthouse", "size": "32x32", "num_inference_steps": 1, "seed": 41, "lora": "fantasy"}`,
		"Accept", "image/png")
	if code != 200 || h.Get("Content-Type") != "image/png" || h.Get("X-Cutenative-Seed") != "41" ||
		!strings.Contains(h.Get("X-Cutenative"), `"fantasy"`) {
		t.Fatalf("status %d, header %v", code, h)
	}
	sameImage(t, "image/png", rgb(t, body), b64png(t, a.Data[1].B64JSON))
	// Without a seed, one is drawn and echoed: asking again with it gives the same image.
	a, _ = f.generate(t, `{"prompt": "a lighthouse", "size": "32x32", "num_inference_steps": 1}`)
	again, _ := f.generate(t, fmt.Sprintf(`{"prompt": "a lighthouse", "size": "32x32", "num_inference_steps": 1, "seed": %d}`, a.Data[0].Seed))
	if a.Data[0].Seed < 0 || a.Data[0].B64JSON != again.Data[0].B64JSON {
		t.Fatalf("the echoed seed %d does not reproduce the image", a.Data[0].Seed)
	}
}

// Requests with different adapter sets at once each get their own adapters' image.
func TestImagesConcurrentAdapters(t *testing.T) {
	f := startImages(t, Config{LongQueue: 64}) // on a loaded machine the probes may put these in the long lane

	sets := []struct {
		lora string
		uses []use
	}{
		{`"fantasy"`, []use{{"fantasy", 0.8}}},
		{`"cyberpunk"`, []use{{"cyberpunk", 0.9}}},
		{`"none"`, nil},
		{`["watercolor", "fantasy"]`, []use{{"watercolor", 0.7}, {"fantasy", 0.8}}},
	}
	want := make([]*cutenative.Image, len(sets))
	for i, s := range sets {
		want[i] = f.want(t, "a harbour at dusk", 32, 32, 2, 3, s.uses...)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for round := 0; round < 4; round++ {
		for i, s := range sets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _, b := f.image(t, fmt.Sprintf(`{"prompt": "a harbour at dusk", "size": "32x32", "num_inference_steps": 2, "seed": 3, "lora": %s}`, s.lora))
				if code != 200 {
					errs <- fmt.Sprintf("set %d: status %d: %s", i, code, b)
					return
				}
				var a imageAnswer
				if err := json.Unmarshal(b, &a); err != nil {
					errs <- err.Error()
					return
				}
				data, _ := base64.StdEncoding.DecodeString(a.Data[0].B64JSON)
				img, err := png.Decode(bytes.NewReader(data))
				if err != nil {
					errs <- err.Error()
					return
				}
				n := pixels4(img)
				if len(n) != len(want[i].Pix)/3*4 {
					errs <- fmt.Sprintf("set %d: %T of %d bytes", i, img, len(n))
					return
				}
				for p, q := 0, 0; p < len(want[i].Pix); p, q = p+3, q+4 {
					if n[q] != want[i].Pix[p] || n[q+1] != want[i].Pix[p+1] || n[q+2] != want[i].Pix[p+2] {
						errs <- fmt.Sprintf("set %d (%s): not its own adapters' image", i, s.lora)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	_, metrics := f.get(t, "/metrics")
	for _, series := range []string{`cutenative_images_total{model="zimage"} 16`, `cutenative_image_steps_total{model="zimage"} 32`,
		`cutenative_adapter_switches_total{model="zimage"}`, `cutenative_adapter_backup_bytes{model="zimage"}`} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// stream: true answers server-sent events: progress (opted in), then one completed event per image.
func TestImagesStream(t *testing.T) {
	f := startImages(t, Config{})
	code, h, body := f.image(t, `{"prompt": "a lighthouse", "size": "32x32", "num_inference_steps": 3, "seed": 5, "n": 2,
		"stream": true, "stream_options": {"include_progress": true}, "lora": "cyberpunk"}`)
	if code != 200 || h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %v", code, h)
	}
	var completed []map[string]any
	progress := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var v map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err != nil {
				t.Fatal(err)
			}
			if v["type"] != event {
				t.Fatalf("event %s carries type %v", event, v["type"])
			}
			switch event {
			case "image_generation.progress":
				progress++
			case "image_generation.completed":
				completed = append(completed, v)
			default:
				t.Fatalf("unexpected event %s: %s", event, line)
			}
		}
	}
	if len(completed) != 2 || progress == 0 {
		t.Fatalf("%d completed, %d progress events:\n%.600s", len(completed), progress, body)
	}
	for i, c := range completed {
		if int(c["image_index"].(float64)) != i || int64(c["seed"].(float64)) != int64(5+i) {
			t.Fatalf("event %d: %v", i, c["seed"])
		}
		sameImage(t, "streamed", b64png(t, c["b64_json"].(string)), f.want(t, "a lighthouse", 32, 32, 3, uint64(5+i), use{"cyberpunk", 0.9}))
	}
	// A failure after the stream began arrives as an error event.
	code, _, body = f.image(t, `{"prompt": "a lighthouse", "size": "32x32", "num_inference_steps": 3, "stream": true, "lora": "nosuch"}`)
	if code != 400 || !strings.Contains(string(body), "nosuch") {
		t.Fatalf("an unknown adapter is refused before the stream: %d %s", code, body)
	}
}

// A client that goes away stops its generation at the next step.
func TestImagesDisconnectStops(t *testing.T) {
	f := startImages(t, Config{})
	type ended struct{ atCancel, atEnd, total uint64 }
	got := make(chan ended, 1)
	f.imageCancelled = func(a, e, n uint64) { got <- ended{a, e, n} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", f.http.URL+"/v1/images/generations",
		strings.NewReader(`{"prompt": "a lighthouse", "size": "128x128", "num_inference_steps": 100, "stream": true,
			"stream_options": {"include_progress": true}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	stepMs := 0.0 // the mean step time so far, from the progress events
	for sc.Scan() {
		var p struct {
			Step    float64 `json:"step"`
			Elapsed float64 `json:"elapsed_ms"`
		}
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(line), &p) == nil && p.Step >= 3 {
			stepMs = p.Elapsed / p.Step
			break
		}
	}
	cancel()
	resp.Body.Close()
	select {
	case e := <-got:
		// The count at the cancellation is the last progress report, polled every 10 ms: the steps of one poll
		// interval may have ended unseen; then the running step ends and no other starts.
		allowed := 2 + uint64(math.Ceil(10/max(stepMs, 0.01)))
		if e.total != 100 || e.atCancel < 3 || e.atEnd > e.atCancel+allowed || e.atEnd >= e.total {
			t.Fatalf("cancelled at step %d of %d, ended at %d (%.2f ms a step: at most %d more)", e.atCancel, e.total, e.atEnd,
				stepMs, allowed)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the generation did not stop")
	}
	// The lane is free again.
	f.generate(t, `{"prompt": "a lighthouse", "size": "32x32", "num_inference_steps": 1}`)
}

// Hostile requests get a 4xx naming the field, and the server stays healthy.
func TestImagesHostile(t *testing.T) {
	f := startImages(t, Config{})
	big := strings.Repeat("a", 1<<20)
	for _, c := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"size 100000", `{"prompt": "x", "size": "100000x100000"}`, 400, "size"},
		{"width beyond the pixels", `{"prompt": "x", "width": 4096, "height": 4096}`, 400, "-max-image-pixels"},
		{"size beyond the position range", `{"prompt": "x", "size": "1024x1024"}`, 400, "axes_lens"},
		{"size not a multiple", `{"prompt": "x", "size": "33x32"}`, 400, "multiples of 16"},
		{"size not WxH", `{"prompt": "x", "size": "big"}`, 400, "size"},
		{"size and width disagree", `{"prompt": "x", "size": "32x32", "width": 64}`, 400, "disagree"},
		{"10000 steps", `{"prompt": "x", "num_inference_steps": 10000}`, 400, "num_inference_steps"},
		{"negative steps", `{"prompt": "x", "num_inference_steps": -1}`, 400, "num_inference_steps"},
		{"n 1000", `{"prompt": "x", "n": 1000}`, 400, "n:"},
		{"n 0", `{"prompt": "x", "n": 0}`, 400, "n:"},
		{"NaN guidance", `{"prompt": "x", "guidance_scale": NaN}`, 400, ""},
		{"huge guidance", `{"prompt": "x", "guidance_scale": 1e309}`, 400, "guidance_scale"},
		{"negative guidance", `{"prompt": "x", "guidance_scale": -1}`, 400, "guidance_scale"},
		{"1 MB prompt", `{"prompt": "` + big + `"}`, 400, "prompt"},
		{"no prompt", `{"size": "32x32"}`, 400, "prompt"},
		{"blank prompt", `{"prompt": "  "}`, 400, "prompt"},
		{"NUL in the prompt", `{"prompt": "a\u0000b"}`, 400, "prompt"},
		{"unknown adapter", `{"prompt": "x", "size": "32x32", "lora": "nosuch"}`, 400, "nosuch"},
		{"adapter named twice", `{"prompt": "x", "size": "32x32", "lora": ["fantasy", "fantasy"]}`, 400, "twice"},
		{"too many adapters", `{"prompt": "x", "lora": ["fantasy", "cyberpunk", "watercolor", "fantasy"]}`, 400, "-max-loras"},
		{"NaN-like scale", `{"prompt": "x", "size": "32x32", "lora": {"name": "fantasy", "scale": 1e300}}`, 400, "scale"},
		{"adapter without a name", `{"prompt": "x", "lora": {"scale": 1}}`, 400, "name"},
		{"lora of a number", `{"prompt": "x", "lora": 3}`, 400, "lora"},
		{"url format", `{"prompt": "x", "response_format": "url"}`, 400, "url"},
		{"jpeg", `{"prompt": "x", "output_format": "jpeg"}`, 400, "output_format"},
		{"partial images", `{"prompt": "x", "partial_images": 2}`, 400, "partial_images"},
		{"unknown field", `{"prompt": "x", "sampler": "dpm"}`, 400, "sampler"},
		{"unknown model", `{"prompt": "x", "model": "dalle"}`, 404, "dalle"},
		{"png for two", `{"prompt": "x", "n": 2, "size": "32x32", "num_inference_steps": 1}`, 400, "image/png"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var header []string
			if c.name == "png for two" {
				header = []string{"Accept", "image/png"}
			}
			code, _, b := f.image(t, c.body, header...)
			if code != c.status || !strings.Contains(string(b), c.want) || !strings.Contains(string(b), `"error"`) {
				t.Fatalf("status %d: %.300s (want %d naming %q)", code, b, c.status, c.want)
			}
		})
	}
	f.generate(t, `{"prompt": "x", "size": "32x32", "num_inference_steps": 1}`)
	if code, _ := f.get(t, "/readyz"); code != 200 {
		t.Fatalf("readyz %d", code)
	}
}

// A request whose estimated compute cannot finish before its deadline is refused before it runs.
func TestImagesTooExpensive(t *testing.T) {
	f := startImages(t, Config{Timeout: 50 * time.Millisecond, MaxImageSteps: 1000})
	code, _, b := f.image(t, `{"prompt": "x", "size": "256x256", "num_inference_steps": 1000, "n": 4}`)
	if code != 400 && code != 429 && code != 503 || !strings.Contains(string(b), "too_expensive") {
		t.Fatalf("status %d: %s", code, b)
	}
}

// GET /v1/loras lists the catalog with each adapter's facts, never a file path.
func TestLoRAList(t *testing.T) {
	f := startImages(t, Config{})
	code, body := f.get(t, "/v1/loras")
	if code != 200 || strings.Contains(body, "safetensors") || strings.Contains(body, "path") {
		t.Fatalf("%d %s", code, body)
	}
	var got struct {
		Data []struct {
			Name     string   `json:"name"`
			Desc     string   `json:"description"`
			Triggers []string `json:"trigger_words"`
			Scale    float64  `json:"default_scale"`
			Rank     int64    `json:"rank"`
			Targets  uint64   `json:"targets"`
			Model    string   `json:"model"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 3 || got.Data[0].Name != "fantasy" || got.Data[0].Rank != 4 || got.Data[0].Targets != 16 ||
		got.Data[0].Model != "zimage" || got.Data[0].Scale != 0.8 || len(got.Data[0].Triggers) != 1 || got.Data[0].Desc == "" {
		t.Fatalf("%s", body)
	}
}

// A catalog entry whose file leaves -lora-dir, or whose adapter does not fit the model, refuses the catalog at
// start; on a reload it keeps the catalog in service.
func TestLoRACatalogAdaptersChecked(t *testing.T) {
	dir := testenv.ZImagePipeline(t, filepath.Join("..", "..", "tests", "fixtures", "zimage", "tiny_a"))
	loraDir, _ := filepath.Abs(zimageLoRADir)
	for _, c := range []struct{ name, path, want string }{
		{"escapes", "../tiny_a/transformer/config.json", "allowed"},
		{"absolute elsewhere", filepath.Join(dir, "transformer", "config.json"), "allowed"},
		{"does not fit", "b_comfy_qkv.safetensors", "entry \"bad\""},
		{"missing", "nosuch.safetensors", "entry \"bad\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			catalog := fmt.Sprintf(`{"threshold": 0.3, "loras": [{"name": "bad", "path": %q, "scale": 1, "positive": "knight"}]}`, c.path)
			s, err := New(Config{Models: map[string]string{"zimage": dir}, Embedder: wordEmbedder{dim: 128},
				LoRACatalog: writeCatalog(t, catalog), LoRADir: loraDir})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Load()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load: %v (want %q)", err, c.want)
			}
		})
	}
	// A reload naming a file that does not fit keeps the catalog in service.
	path := writeCatalog(t, imageCatalog)
	f := startImages(t, Config{LoRACatalog: path})
	broken := strings.Replace(imageCatalog, "kohya_alpha.safetensors", "b_comfy_qkv.safetensors", 1)
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.LoRAs().Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "cyberpunk") {
		t.Fatalf("reload: %v", err)
	}
	a, _ := f.generate(t, `{"prompt": "x", "size": "32x32", "num_inference_steps": 1, "seed": 1, "lora": "cyberpunk"}`)
	sameImage(t, "after a refused reload", b64png(t, a.Data[0].B64JSON), f.want(t, "x", 32, 32, 1, 1, use{"cyberpunk", 0.9}))
}

// A reload keeps the adapters of unchanged files (the same handle), loads the changed entry's file, and frees the
// adapter it dropped after the grace period; requests after the reload use the new file.
func TestLoRAReloadReusesAndRetiresAdapters(t *testing.T) {
	path := writeCatalog(t, imageCatalog)
	f := startImages(t, Config{LoRACatalog: path})
	f.adapterGrace = 50 * time.Millisecond
	current := func() *catalogAdapters {
		f.adaptersMu.Lock()
		defer f.adaptersMu.Unlock()
		return f.Server.adapters
	}
	before := current()
	if before == nil || len(before.byName) != 3 {
		t.Fatalf("adapters at start: %+v", before)
	}
	changed := strings.Replace(imageCatalog, "kohya_alpha.safetensors", "peft_names_alpha.safetensors", 1)
	if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.LoRAs().Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := current()
	if after.byName["fantasy"] != before.byName["fantasy"] || after.byName["watercolor"] != before.byName["watercolor"] {
		t.Fatal("a reload loaded unchanged files again")
	}
	if after.byName["cyberpunk"] == before.byName["cyberpunk"] {
		t.Fatal("a reload kept the adapter of a file the catalog no longer names")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f.adaptersMu.Lock()
		n := len(f.retired)
		f.adaptersMu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dropped adapters still held after the grace period", n)
		}
	}
	loraDir, _ := filepath.Abs(zimageLoRADir)
	a, err := f.ref.LoadAdapter(filepath.Join(loraDir, "peft_names_alpha.safetensors"), &cutenative.AdapterOptions{AllowedDir: loraDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	f.adapters["cyberpunk"] = a
	got, _ := f.generate(t, `{"prompt": "x", "size": "32x32", "num_inference_steps": 1, "seed": 3, "lora": "cyberpunk"}`)
	sameImage(t, "after the reload", b64png(t, got.Data[0].B64JSON), f.want(t, "x", 32, 32, 1, 3, use{"cyberpunk", 0.9}))
}
