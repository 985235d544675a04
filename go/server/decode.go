package server

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"

	"github.com/cutenative/cutenative/go/internal/jsonstream"
)

// Request bodies are decoded as they arrive (internal/jsonstream), straight into the compact form the library
// takes (float32 values, NaN for JSON null), counting every value and string against the request's limits and its
// bytes in flight (budget.go) as it goes: a body past a limit is refused at the first value beyond it, without
// reading the rest, and nothing proportional to the body is allocated before it is counted.

// maxJSONDepth bounds nesting in request bodies (a forecast request needs 5 levels).
const maxJSONDepth = 16

// String limits of request fields, in bytes.
const (
	maxNameBytes      = 256  // model names
	maxIDBytes        = 1024 // series ids (echoed in the answer)
	maxTimestampBytes = 64   // "2024-04-10T00:05:00.123456789+05:30" is 35
	maxLabelBytes     = 1024 // categorical covariate labels
	maxSkipBytes      = 1024 // strings of fields read and ignored ("user")
	decodeBufferBytes = 32 << 10
)

// decoder is one body's decoding: the stream, the request's account and the limits it is checked against.
type decoder struct {
	r      *jsonstream.Reader
	acct   *account
	values int64 // input values so far
	lim    limits
}

func newDecoder(body io.Reader, acct *account, lim limits) (*decoder, error) {
	if err := acct.charge(decodeBufferBytes); err != nil {
		return nil, err
	}
	return &decoder{r: jsonstream.NewReader(body, decodeBufferBytes, maxJSONDepth), acct: acct, lim: lim}, nil
}

// fail maps a decoding error onto the answer: a *jsonstream.Error (malformed JSON, a value refused with its path)
// is 400, the body limit 413, a slow body 408, an *apiError as it is.
func decodeError(err error) *apiError {
	var ae *apiError
	var je *jsonstream.Error
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &je):
		return badRequest(je.Error())
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", reason: "body_bytes",
			Message: fmt.Sprintf("the request body exceeds %d bytes (-max-body)", mbe.Limit)}
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return &apiError{Status: http.StatusRequestTimeout, Code: "request_timeout", reason: "read_timeout",
			Message: "the request body did not arrive within the server's timeout (-timeout)"}
	default:
		return badRequest("the request body could not be read")
	}
}

// str reads a string of at most max bytes and charges it.
func (d *decoder) str(max int) (string, error) {
	s, err := d.r.String(max)
	if err != nil {
		return "", err
	}
	return s, d.acct.charge(int64(len(s)) + bytesPerString)
}

// strs reads an array of strings, each at most max bytes, at most maxN of them.
func (d *decoder) strs(max, maxN int, what string) ([]string, error) {
	out := []string{}
	err := d.r.Array(func(i int) error {
		if i == maxN {
			return d.r.Errorf("more than %d %s", maxN, what)
		}
		s, err := d.str(max)
		out = append(out, s)
		return err
	})
	return out, err
}

// labels reads an array of strings or nulls (categorical values, nil: missing).
func (d *decoder) labels(maxN int) ([]*string, error) {
	out := []*string{}
	err := d.r.Array(func(i int) error {
		if i == maxN {
			return d.r.Errorf("more than %d labels (the series' length, at most %d)", maxN, maxN)
		}
		if err := d.count(); err != nil {
			return err
		}
		if null, err := d.r.Null(); err != nil || null {
			out = append(out, nil)
			return err
		}
		s, err := d.str(maxLabelBytes)
		out = append(out, &s)
		return err
	})
	return out, err
}

// count counts one input value against the request's limit and charges it.
func (d *decoder) count() error {
	d.values++
	if d.values > d.lim.MaxInputValues {
		return d.r.Errorf("the request holds more than %d input values (values and covariate values, -max-input-values)",
			d.lim.MaxInputValues)
	}
	if d.values%1024 == 0 {
		return d.acct.charge(1024 * bytesPerValue)
	}
	return nil
}

// floats reads an array of numbers or nulls (NaN) into float32s, each finite as a float32, at most maxN of them;
// limitName names the limit in the refusal.
func (d *decoder) floats(maxN int, limitName string) ([]float32, error) {
	out := []float32{}
	err := d.r.Array(func(i int) error {
		if i == maxN {
			return d.r.Errorf("more than %d values (%s)", maxN, limitName)
		}
		if err := d.count(); err != nil {
			return err
		}
		if null, err := d.r.Null(); err != nil || null {
			out = append(out, float32(math.NaN()))
			return err
		}
		x, err := d.r.Number()
		if err != nil {
			return err
		}
		if math.Abs(x) > math.MaxFloat32 {
			return d.r.Errorf("not a finite float32")
		}
		out = append(out, float32(x))
		return nil
	})
	return out, err
}

func (d *decoder) integer(lo, hi int64) (int64, error) {
	v, err := d.r.Int()
	if err == nil && (v < lo || v > hi) {
		err = d.r.Errorf("%d is out of range [%d, %d]", v, lo, hi)
	}
	return v, err
}

func (d *decoder) unknown(key string, where string) error {
	return d.r.Errorf("unknown field (%s takes none named %q)", where, key)
}

// decodeForecast reads a POST /v1/forecast body.
func decodeForecast(d *decoder) (*forecastRequest, error) {
	req := &forecastRequest{}
	err := d.r.Object(func(key string) error {
		var err error
		switch key {
		case "model":
			req.Model, err = d.str(maxNameBytes)
		case "horizon":
			var h int64
			if h, err = d.r.Int(); err == nil { // the lower bound is the model's forecaster's to check
				if h > int64(d.lim.MaxHorizon) {
					err = d.r.Errorf("%d exceeds the server's limit of %d (-max-horizon)", h, d.lim.MaxHorizon)
				}
				req.Horizon = int(max(h, math.MinInt32))
			}
		case "quantiles":
			req.Quantiles = []float64{}
			err = d.r.Array(func(i int) error {
				if i == d.lim.MaxQuantiles {
					return d.r.Errorf("more than %d levels", d.lim.MaxQuantiles)
				}
				q, err := d.r.Number()
				req.Quantiles = append(req.Quantiles, q)
				return err
			})
		case "series":
			req.Series = []seriesIn{}
			err = d.r.Array(func(i int) error {
				if i == d.lim.MaxSeries {
					return d.r.Errorf("more than %d series (-max-series)", d.lim.MaxSeries)
				}
				if err := d.acct.charge(bytesPerRecord); err != nil {
					return err
				}
				req.Series = append(req.Series, seriesIn{})
				return decodeSeries(d, &req.Series[len(req.Series)-1])
			})
		case "temperature", "top_p":
			var v float64
			if v, err = d.r.Number(); err == nil {
				if key == "temperature" {
					req.Temperature = &v
				} else {
					req.TopP = &v
				}
			}
		case "top_k", "sample_count", "samples_per_batch":
			var v int64
			if v, err = d.integer(math.MinInt32, math.MaxInt32); err == nil {
				n := int(v)
				switch key {
				case "top_k":
					req.TopK = &n
				case "sample_count":
					req.SampleCount = &n
				default:
					req.SamplesPerBatch = &n
				}
			}
		case "seed":
			var v uint64
			if v, err = d.r.Uint(); err == nil {
				req.Seed = &v
			}
		case "return_samples", "kv_cache", "mean_rollout":
			var v bool
			if v, err = d.r.Bool(); err == nil {
				switch key {
				case "return_samples":
					req.ReturnSamples = &v
				case "kv_cache":
					req.KVCache = &v
				default:
					req.MeanRollout = &v
				}
			}
		default:
			err = d.unknown(key, "a forecast request")
		}
		return err
	})
	if err == nil {
		err = d.r.End()
	}
	return req, err
}

func decodeSeries(d *decoder, s *seriesIn) error {
	maxLen := d.lim.MaxSeriesLen
	return d.r.Object(func(key string) error {
		var err error
		switch key {
		case "id":
			s.ID, err = d.str(maxIDBytes)
		case "values":
			s.Values, err = d.floats(maxLen, "-max-series-len")
		case "timestamps":
			s.Timestamps, err = d.strs(maxTimestampBytes, maxLen, "timestamps (-max-series-len)")
		case "future_timestamps":
			s.FutureTimestamps, err = d.strs(maxTimestampBytes, d.lim.MaxHorizon, "timestamps (-max-horizon)")
		case "group":
			var g int64
			g, err = d.integer(math.MinInt32, math.MaxInt32)
			s.Group = int(g)
		case "covariates":
			s.Covariates = []covariateIn{}
			err = d.r.Array(func(i int) error {
				if i == d.lim.MaxCovariates {
					return d.r.Errorf("more than %d covariates", d.lim.MaxCovariates)
				}
				if err := d.acct.charge(bytesPerRecord); err != nil {
					return err
				}
				s.Covariates = append(s.Covariates, covariateIn{})
				return decodeCovariate(d, &s.Covariates[len(s.Covariates)-1])
			})
		default:
			c := channelIndex(key)
			if c < 0 {
				return d.unknown(key, "a series")
			}
			s.Channels[c], err = d.floats(maxLen, "-max-series-len")
		}
		return err
	})
}

func decodeCovariate(d *decoder, c *covariateIn) error {
	maxLen := d.lim.MaxSeriesLen
	return d.r.Object(func(key string) error {
		var err error
		switch key {
		case "past":
			c.Past, err = d.floats(maxLen, "-max-series-len")
		case "future":
			c.Future, err = d.floats(d.lim.MaxHorizon, "-max-horizon")
		case "past_labels":
			c.PastLabels, err = d.labels(maxLen)
		case "future_labels":
			c.FutureLabels, err = d.labels(d.lim.MaxHorizon)
		default:
			err = d.unknown(key, "a covariate")
		}
		return err
	})
}

// channelIndex is the index of a Kronos channel field ("open" .. "amount"), or -1.
func channelIndex(key string) int {
	for i, c := range kronosChannels {
		if c == key {
			return i
		}
	}
	return -1
}
