package server

// POST /v1/images/generations: OpenAI's image endpoint (../shared/specs/images_api.md) over the image models of the
// table, through the same admission, lanes and cost model as every endpoint: the body decoded as it arrives, the
// model found by capability, the style adapter picked (the caller's names, or the catalog's router for "auto"),
// the work estimated in pixels x steps x images, then one library call per request in the model's lane, each
// image seeded seed + i. The answer is OpenAI's JSON (b64_json PNGs), the PNG itself with Accept: image/png, or
// server-sent events with stream: true; cutenative's own facts (the routing decision with every candidate's
// score, timings, seeds) ride in one "cutenative" object.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/jsonstream"
	"github.com/cutenative/cutenative/go/lora"
)

// imageRequest is a decoded POST /v1/images/generations body.
type imageRequest struct {
	Model          string
	Prompt         string
	promptGiven    bool
	N              int
	Width, Height  int
	ResponseFormat string
	OutputFormat   string
	Stream         bool
	Progress       bool // stream_options.include_progress
	PartialImages  int
	NegativePrompt *string
	Steps          int
	Guidance       *float64
	Seed           *int64
	LoRA           *loraRequest // nil: the server's default (Config.LoRADefault)
	LoRAScale      *float64     // the scale of adapters named without one, "auto"'s included
	LoRAMax        *int
	LoRAMinScore   *float64
}

// loraRequest is the "lora" field: "auto", "none" (or null), a catalog name, {name, scale}, or a list of those.
type loraRequest struct {
	auto, none bool
	items      []loraItem
}

type loraItem struct {
	name  string
	scale *float64
}

const maxImageSizeText = 32 // "4096x4096" is 9

// decodeImageRequest reads the body; OpenAI's fields that do not change a Z-Image image (quality, style, background,
// moderation, output_compression, user) are accepted and ignored, so OpenAI's SDKs work unchanged.
func decodeImageRequest(d *decoder, maxLoRAs int) (*imageRequest, error) {
	req := &imageRequest{N: 1}
	size := ""
	err := d.r.Object(func(key string) error {
		var err error
		switch key {
		case "model":
			req.Model, err = d.str(maxNameBytes)
		case "prompt":
			req.promptGiven = true
			req.Prompt, err = d.str(cutenative.MaxPromptBytes)
		case "negative_prompt":
			var s string
			if s, err = d.str(cutenative.MaxPromptBytes); err == nil {
				req.NegativePrompt = &s
			}
		case "n":
			var n int64
			n, err = d.integer(math.MinInt32, math.MaxInt32)
			req.N = int(n)
		case "size":
			size, err = d.str(maxImageSizeText)
		case "width", "height":
			var n int64
			if n, err = d.integer(math.MinInt32, math.MaxInt32); err == nil {
				if key == "width" {
					req.Width = int(n)
				} else {
					req.Height = int(n)
				}
			}
		case "response_format":
			req.ResponseFormat, err = d.str(maxNameBytes)
		case "output_format":
			req.OutputFormat, err = d.str(maxNameBytes)
		case "stream":
			req.Stream, err = d.r.Bool()
		case "stream_options":
			err = d.r.Object(func(k string) error {
				if k != "include_progress" {
					return d.unknown(k, "stream_options")
				}
				var err error
				req.Progress, err = d.r.Bool()
				return err
			})
		case "partial_images":
			var n int64
			n, err = d.integer(math.MinInt32, math.MaxInt32)
			req.PartialImages = int(n)
		case "num_inference_steps", "steps":
			var n int64
			n, err = d.integer(math.MinInt32, math.MaxInt32)
			req.Steps = int(n)
		case "guidance_scale", "cfg_scale", "guidance":
			var g float64
			if g, err = d.r.Number(); err == nil {
				req.Guidance = &g
			}
		case "seed":
			var s int64
			if s, err = d.r.Int(); err == nil {
				req.Seed = &s
			}
		case "lora":
			req.LoRA, err = decodeLoRA(d, maxLoRAs)
		case "lora_scale":
			var v float64
			if v, err = d.r.Number(); err == nil {
				req.LoRAScale = &v
			}
		case "lora_max":
			var n int64
			if n, err = d.integer(0, math.MaxInt32); err == nil {
				v := int(n)
				req.LoRAMax = &v
			}
		case "lora_min_score":
			var v float64
			if v, err = d.r.Number(); err == nil {
				req.LoRAMinScore = &v
			}
		case "quality", "style", "background", "moderation", "user":
			if null, e := d.r.Null(); e != nil || !null {
				_, err = d.str(maxSkipBytes)
			}
		case "output_compression":
			if null, e := d.r.Null(); e != nil || !null {
				_, err = d.r.Number()
			}
		default:
			err = d.unknown(key, "an image request")
		}
		return err
	})
	if err == nil {
		err = d.r.End()
	}
	if err == nil && size != "" && size != "auto" {
		w, h, ok := strings.Cut(size, "x")
		wi, e1 := strconv.Atoi(w)
		hi, e2 := strconv.Atoi(h)
		if !ok || e1 != nil || e2 != nil {
			return nil, badRequest(fmt.Sprintf(`size: %q is not WIDTHxHEIGHT (e.g. "1024x1024") or "auto"`, size))
		}
		if (req.Width != 0 && req.Width != wi) || (req.Height != 0 && req.Height != hi) {
			return nil, badRequest("size: it and width/height disagree")
		}
		req.Width, req.Height = wi, hi
	}
	return req, err
}

func decodeLoRA(d *decoder, maxLoRAs int) (*loraRequest, error) {
	item := func() (loraItem, error) {
		k, err := d.r.Peek()
		if err != nil {
			return loraItem{}, err
		}
		if k == jsonstream.String {
			s, err := d.str(lora.DefaultLimits.MaxNameBytes)
			return loraItem{name: s}, err
		}
		var it loraItem
		err = d.r.Object(func(key string) error {
			var err error
			switch key {
			case "name":
				it.name, err = d.str(lora.DefaultLimits.MaxNameBytes)
			case "scale":
				var v float64
				if v, err = d.r.Number(); err == nil {
					it.scale = &v
				}
			default:
				err = d.unknown(key, "a LoRA")
			}
			return err
		})
		if err == nil && it.name == "" {
			err = d.r.Errorf("a LoRA needs a name")
		}
		return it, err
	}
	out := &loraRequest{}
	k, err := d.r.Peek()
	if err != nil {
		return nil, err
	}
	switch k {
	case jsonstream.Null:
		out.none = true
		_, err = d.r.Null()
	case jsonstream.String, jsonstream.Object:
		var it loraItem
		if it, err = item(); err == nil {
			switch {
			case it.scale == nil && it.name == "auto":
				out.auto = true
			case it.scale == nil && it.name == "none":
				out.none = true
			default:
				out.items = append(out.items, it)
			}
		}
	case jsonstream.Array:
		err = d.r.Array(func(i int) error {
			if i == maxLoRAs {
				return d.r.Errorf("more than %d adapters (-max-loras)", maxLoRAs)
			}
			it, err := item()
			out.items = append(out.items, it)
			return err
		})
	default:
		err = d.r.Errorf(`expected "auto", "none", a name, {"name", "scale"} or a list of them, got %s`, k)
	}
	return out, err
}

// loraPlan is what resolveLoRA decided: the answer's account (api.LoRADecision) and the adapters to apply.
type loraPlan struct {
	decision api.LoRADecision
	uses     []cutenative.AdapterUse
}

// catalogAdapters is what the server keeps with a catalog (lora.Router's attachment): each entry's adapter, loaded
// and validated against the image model.
type catalogAdapters struct {
	model  string
	byName map[string]*cutenative.Adapter
}

// attachAdapters loads every entry's adapter file under Config.LoRADir against the image model (the catalog
// registry's attach hook): a file that is missing, escapes the directory or does not fit the model refuses the
// catalog, naming the entry.
func (s *Server) attachAdapters(ctx context.Context, cat *lora.Catalog) (any, error) {
	if s.cfg.LoRADir == "" {
		return nil, nil
	}
	m, e := s.find("", capGenerate)
	if e != nil || m.model == nil {
		return nil, nil // no image model: the catalog serves search only
	}
	out := &catalogAdapters{model: m.name, byName: map[string]*cutenative.Adapter{}}
	for _, entry := range cat.Entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if entry.Path == "" {
			continue
		}
		path := entry.Path
		if !strings.HasPrefix(path, "/") {
			path = s.cfg.LoRADir + "/" + path
		}
		a, err := m.model.LoadAdapter(path, &cutenative.AdapterOptions{AllowedDir: s.cfg.LoRADir})
		if err != nil {
			for _, done := range out.byName {
				done.Close()
			}
			return nil, fmt.Errorf("entry %q: %w", entry.Name, err)
		}
		out.byName[entry.Name] = a
	}
	return out, nil
}

// adapterStats reports every image model's adapter state (the /metrics scrape).
func (s *Server) adapterStats(report func(model string, st cutenative.AdapterStats)) {
	s.mu.RLock()
	var ms []*servedModel
	for _, m := range s.models {
		if m.caps&capGenerate != 0 && m.model != nil {
			ms = append(ms, m)
		}
	}
	s.mu.RUnlock()
	sort.Slice(ms, func(i, j int) bool { return ms[i].name < ms[j].name })
	for _, m := range ms {
		if st, err := m.model.AdapterStats(); err == nil {
			report(m.name, st)
		}
	}
}

// resolveLoRA turns the request's "lora" into adapters, routing the prompt through the catalog for "auto".
func (s *Server) resolveLoRA(rq *requestScope, m *servedModel, req *imageRequest) (*loraPlan, *apiError) {
	spec := req.LoRA
	if spec == nil {
		spec = &loraRequest{none: s.cfg.LoRADefault != "auto", auto: s.cfg.LoRADefault == "auto"}
	}
	if spec.none {
		return &loraPlan{decision: api.LoRADecision{Mode: "none", Decision: "none", Applied: []api.AppliedLoRA{}}}, nil
	}
	reg := s.loras.Load()
	var router *lora.Router
	var adapters *catalogAdapters
	if reg != nil {
		router = reg.Router()
		adapters, _ = router.Attachment().(*catalogAdapters)
	}
	if router == nil || adapters == nil || adapters.model != m.name {
		what := "no LoRA catalog is configured (-lora-catalog)"
		if router != nil {
			what = fmt.Sprintf("the LoRA catalog's adapters are not loaded for model %q (-lora-dir)", m.name)
		}
		return nil, &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", reason: "lora", Message: "lora: " + what}
	}
	scaleOf := func(name string, given *float64) (float64, *apiError) {
		v := 0.0
		switch {
		case given != nil:
			v = *given
		case req.LoRAScale != nil:
			v = *req.LoRAScale
		default:
			for _, e := range router.Catalog().Entries {
				if e.Name == name {
					v = e.Scale
				}
			}
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 16 {
			return 0, badRequest(fmt.Sprintf("lora: the scale of %q must be finite and within [-16, 16]", name))
		}
		return v, nil
	}
	apply := func(out *loraPlan, name string, given *float64) *apiError {
		a := adapters.byName[name]
		if a == nil {
			return &apiError{Status: http.StatusBadRequest, Code: "lora_not_found", reason: "lora",
				Message: fmt.Sprintf("lora: no adapter named %q in the catalog (GET /v1/loras lists them)", name)}
		}
		scale, e := scaleOf(name, given)
		if e != nil {
			return e
		}
		out.decision.Applied = append(out.decision.Applied, api.AppliedLoRA{Name: name, Scale: scale})
		out.uses = append(out.uses, cutenative.AdapterUse{Adapter: a, Scale: float32(scale)})
		return nil
	}
	if !spec.auto {
		out := &loraPlan{decision: api.LoRADecision{Mode: "explicit", Decision: "explicit", Applied: []api.AppliedLoRA{}}}
		seen := map[string]bool{}
		for _, it := range spec.items {
			if seen[it.name] {
				return nil, badRequest(fmt.Sprintf("lora: %q named twice", it.name))
			}
			seen[it.name] = true
			if e := apply(out, it.name, it.scale); e != nil {
				return nil, e
			}
		}
		return out, nil
	}
	// auto: the prompt routed through the catalog, at most lora_max adapters at or above the threshold.
	emb, e := s.find("", capEmbed)
	if e != nil {
		return nil, e
	}
	if err := lora.CheckPrompt(req.Prompt); err != nil {
		return nil, queryError(err)
	}
	vecs, e := s.embedCall(rq, emb, []string{req.Prompt})
	if e != nil {
		return nil, e
	}
	res, err := router.SearchEmbedding(vecs[0], len(router.Catalog().Entries))
	if err != nil {
		return nil, fromError(err)
	}
	threshold := router.Catalog().Threshold
	if req.LoRAMinScore != nil {
		threshold = *req.LoRAMinScore
	}
	limit := 1
	if req.LoRAMax != nil {
		limit = min(*req.LoRAMax, s.cfg.MaxLoRAs)
	}
	out := &loraPlan{decision: api.LoRADecision{Mode: "auto", Decision: "abstained", Applied: []api.AppliedLoRA{},
		Candidates: []api.LoRACandidate{}, Threshold: &threshold}}
	for _, c := range res.Candidates {
		out.decision.Candidates = append(out.decision.Candidates, api.LoRACandidate{Name: c.Name, Score: c.Score,
			PositiveSimilarity: c.PositiveSimilarity, NegativeSimilarity: c.NegativeSimilarity})
		if c.Score >= threshold && len(out.uses) < limit {
			if e := apply(out, c.Name, nil); e != nil {
				return nil, e
			}
			out.decision.Decision = "routed"
		}
	}
	return out, nil
}

// imageWork: per image and step, a transformer pass over the image's patch tokens (its caption's tokens, at most
// 512, and the VAE decoder, once per image, fall into the per-pass and per-unit costs the probes measure: an
// estimate that errs long for many steps).
func imageWork(m *servedModel, w, h, steps, n int) work {
	mult := int64(max(m.info.ImageSizeMultiple, 1))
	tokens := (int64(w) / mult) * (int64(h) / mult)
	return work{passes: int64(n) * int64(steps), units: int64(n) * int64(steps) * tokens,
		what: fmt.Sprintf("%d image(s) of %dx%d, %d steps", n, w, h, steps)}
}

// generateProbes measure an image model on one step at two sizes: 32 and 128 px for a multiple of 16 on the CPU
// (inside the tiny fixtures' position ranges), 256 and 1024 px on a GPU (the sizes served).
func generateProbes(m *servedModel) (probe, probe) {
	mult := int(max(m.info.ImageSizeMultiple, 1))
	small, large := 2*mult, 8*mult
	if strings.HasPrefix(m.info.Device, "cuda") {
		small, large = 16*mult, 64*mult
	}
	mk := func(side int) probe {
		req := &cutenative.GenerateRequest{Prompt: "a lighthouse", Width: side, Height: side, Steps: 1, Guidance: cutenative.Ptr[float32](0)}
		return probe{w: imageWork(m, side, side, 1, 1), run: func(ctx context.Context) error {
			_, err := m.model.Generate(ctx, req)
			return err
		}}
	}
	return mk(small), mk(large)
}

// imageResult is one library call's images and timings.
type imageResult struct {
	images  []*cutenative.Image
	lib     cutenative.Timings // the library's phases, summed over the images
	queueMs float64
	genMs   float64
}

// timings is the answer's timings_ms: the queue, the routing (the prompt's embedding and the catalog's scores),
// the library's phases summed over the images (cutenative.Timings), the PNG encoding and the whole request.
func (res imageResult) timings(routeMs, encodeMs float64, t0 time.Time) map[string]float64 {
	lib := res.lib
	return map[string]float64{"queue": res.queueMs, "route": routeMs, "prepare": lib.Prepare, "adapters": lib.Adapters,
		"text": lib.Text, "denoise": lib.Denoise, "decode": lib.Decode, "generate": res.genMs, "encode": encodeMs,
		"total": ms(time.Since(t0))}
}

func (s *Server) handleImages(w http.ResponseWriter, r *http.Request) *apiError {
	rq, e := s.begin(w, r)
	if e != nil {
		return e
	}
	defer rq.end()
	t0 := time.Now()
	d, err := newDecoder(rq.body, rq.acct, s.decodeLimits())
	if err != nil {
		return decodeError(err)
	}
	req, err := decodeImageRequest(d, s.cfg.MaxLoRAs)
	if err != nil {
		return decodeError(err)
	}
	m, e := s.find(req.Model, capGenerate)
	noteModel(r, cmpOr(req.Model, s.defaultName(capGenerate)), e == nil, -1)
	if e != nil {
		return e
	}
	if e := s.checkImageRequest(m, req); e != nil {
		return e
	}
	steps := req.Steps
	if steps == 0 {
		steps = int(max(m.info.DefaultSteps, 1))
	}
	gen := cutenative.GenerateRequest{Prompt: req.Prompt, NegativePrompt: req.NegativePrompt, Width: req.Width, Height: req.Height,
		Steps: steps}
	if req.Guidance != nil {
		g := float32(*req.Guidance)
		gen.Guidance = &g
	}
	// The library's own checks (the model's position range, the prompt's encoding) before anything is queued.
	if _, err := m.model.CheckGenerate(&gen); err != nil {
		return fromError(err)
	}
	seed := int64(0)
	if req.Seed != nil && *req.Seed >= 0 {
		seed = *req.Seed
	} else {
		seed = int64(freshSeed() >> 1) // non-negative, echoed
	}
	// The answer's bytes: per image its RGB pixels (3 a pixel) until its PNG (at most ~4.1 a pixel, kept until
	// written) replaces them, plus one RGBA copy (4 a pixel) while encoding; base64 is streamed to the client.
	pixels := int64(req.Width) * int64(req.Height)
	if err := rq.acct.charge(int64(req.N)*pixels*8 + pixels*4); err != nil {
		return fromError(err)
	}
	wk := imageWork(m, req.Width, req.Height, steps, req.N)
	est := estimate{work: wk, seconds: m.cost.seconds(wk)}
	lane, e := s.admission(rq.ctx, m, est)
	if e != nil {
		return e
	}
	tRoute := time.Now()
	plan, e := s.resolveLoRA(rq, m, req)
	if e != nil {
		return e
	}
	routeMs := ms(time.Since(tRoute))
	gen.Adapters = plan.uses
	progress := make(chan [2]uint64, 16)
	run := func() (imageResult, error) {
		submitted := time.Now()
		return runAlone(rq.ctx, lane, 0, est.seconds, func(ctx context.Context) (imageResult, error) {
			res := imageResult{queueMs: ms(time.Since(submitted))}
			start := time.Now()
			total := uint64(req.N * steps)
			var last, atCancel atomic.Uint64 // steps reported, and where they stood when the request was cancelled
			stop := context.AfterFunc(ctx, func() { atCancel.Store(last.Load() + 1) })
			defer func() {
				if stop() {
					return
				}
				at, end := atCancel.Load()-1, last.Load()
				s.logger().Info("image generation cancelled", "model", m.name, "steps_at_cancel", at, "steps_at_end", end, "steps", total)
				if s.imageCancelled != nil {
					s.imageCancelled(at, end, total)
				}
			}()
			for i := 0; i < req.N; i++ {
				g := gen
				g.Seed = uint64(seed) + uint64(i)
				img, err := m.model.GenerateWithOptions(ctx, &g, &cutenative.GenerateOptions{ProgressInterval: 10 * time.Millisecond,
					Progress: func(done, _ uint64) {
						step := uint64(i*steps) + done
						last.Store(step)
						reportProgress(ctx, step, total)
						select {
						case progress <- [2]uint64{step, total}:
						default: // a slow reader loses progress events, never the image
						}
					}})
				if err != nil {
					return res, err
				}
				res.images = append(res.images, img)
				res.lib.Prepare += img.Timings.Prepare
				res.lib.Adapters += img.Timings.Adapters
				res.lib.Text += img.Timings.Text
				res.lib.Denoise += img.Timings.Denoise
				res.lib.Decode += img.Timings.Decode
				res.lib.Total += img.Timings.Total
			}
			res.genMs = ms(time.Since(start))
			s.metrics.countImages(m.name, req.N, req.N*steps, res.lib.Denoise/1000)
			return res, nil
		})
	}
	facts := api.ImageFacts{Model: m.name, Steps: steps, Seeds: make([]int64, req.N), LoRA: plan.decision}
	if req.Guidance != nil {
		facts.GuidanceScale = *req.Guidance
	} else {
		facts.GuidanceScale = float64(m.info.DefaultGuidance)
	}
	for i := range facts.Seeds {
		facts.Seeds[i] = seed + int64(i)
	}
	size := fmt.Sprintf("%dx%d", req.Width, req.Height)
	if req.Stream {
		return s.streamImages(w, rq, run, progress, req, facts, size, routeMs, t0)
	}
	res, err := run()
	if err != nil {
		return fromError(err)
	}
	tEnc := time.Now()
	pngs, e := s.encodePNGs(res.images)
	if e != nil {
		return e
	}
	facts.Timings = res.timings(routeMs, ms(time.Since(tEnc)), t0)
	if strings.Contains(r.Header.Get("Accept"), "image/png") {
		if req.N != 1 {
			return badRequest("n: Accept: image/png answers one image; ask for n = 1 or for JSON")
		}
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("X-Cutenative-Seed", strconv.FormatInt(seed, 10))
		if body, err := json.Marshal(facts); err == nil {
			w.Header().Set("X-Cutenative", string(body)) // the "cutenative" object of the JSON answer
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(pngs[0])
		return nil
	}
	return writeImagesJSON(w, size, pngs, facts)
}

// writeImagesJSON writes OpenAI's answer {"created", "output_format", "size", "data": [{"b64_json", "seed"}],
// "cutenative"}, each image's base64 streamed from its PNG (never a whole second copy in memory).
func writeImagesJSON(w http.ResponseWriter, size string, pngs [][]byte, facts api.ImageFacts) *apiError {
	tail, err := json.Marshal(facts)
	if err != nil {
		return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "the response could not be encoded", cause: err}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, `{"created":%d,"output_format":"png","size":%q,"data":[`, time.Now().Unix(), size)
	for i, p := range pngs {
		if i > 0 {
			_, _ = io.WriteString(w, ",")
		}
		_, _ = io.WriteString(w, `{"b64_json":"`)
		enc := base64.NewEncoder(base64.StdEncoding, w)
		_, _ = enc.Write(p)
		_ = enc.Close()
		fmt.Fprintf(w, `","seed":%d}`, facts.Seeds[i])
		pngs[i] = nil
	}
	fmt.Fprintf(w, `],"cutenative":%s}`+"\n", tail)
	return nil
}

// checkImageRequest applies the server's limits and the model's size rules, each refusal naming the field.
func (s *Server) checkImageRequest(m *servedModel, req *imageRequest) *apiError {
	mult := int(max(m.info.ImageSizeMultiple, 1))
	if req.Width == 0 && req.Height == 0 {
		req.Width, req.Height = cutenative.DefaultImageSize, cutenative.DefaultImageSize
	}
	switch {
	case !req.promptGiven || strings.TrimSpace(req.Prompt) == "":
		return badRequest("prompt: required and not blank")
	case strings.IndexByte(req.Prompt, 0) >= 0:
		return badRequest("prompt: contains a NUL character")
	case req.NegativePrompt != nil && strings.IndexByte(*req.NegativePrompt, 0) >= 0:
		return badRequest("negative_prompt: contains a NUL character")
	case req.N < 1 || req.N > s.cfg.MaxImages:
		return badRequest(fmt.Sprintf("n: %d is not in [1, %d] (-max-images)", req.N, s.cfg.MaxImages))
	case req.Width < 1 || req.Height < 1 || req.Width%mult != 0 || req.Height%mult != 0:
		return badRequest(fmt.Sprintf("size: %dx%d: width and height must be positive multiples of %d (this model's image_size_multiple)",
			req.Width, req.Height, mult))
	case int64(req.Width)*int64(req.Height) > s.cfg.MaxImagePixels:
		return badRequest(fmt.Sprintf("size: %dx%d is %d pixels, more than %d (-max-image-pixels)", req.Width, req.Height,
			int64(req.Width)*int64(req.Height), s.cfg.MaxImagePixels))
	case req.Width > 4096 || req.Height > 4096:
		return badRequest(fmt.Sprintf("size: %dx%d: at most 4096 a side", req.Width, req.Height))
	case req.Steps < 0 || req.Steps > s.cfg.MaxImageSteps:
		return badRequest(fmt.Sprintf("num_inference_steps: %d is not in [1, %d] (-max-image-steps; 0 or absent: the model's %d)",
			req.Steps, s.cfg.MaxImageSteps, m.info.DefaultSteps))
	case req.Guidance != nil && (math.IsNaN(*req.Guidance) || math.IsInf(*req.Guidance, 0) || *req.Guidance < 0 || *req.Guidance > 100):
		return badRequest("guidance_scale: must be a finite number in [0, 100] (0: no classifier-free guidance)")
	case req.ResponseFormat != "" && req.ResponseFormat != "b64_json":
		if req.ResponseFormat == "url" {
			return &apiError{Status: http.StatusBadRequest, Code: "unsupported", reason: "response_format",
				Message: `response_format: "url" needs image storage, which this server has none of; use "b64_json"`}
		}
		return badRequest(fmt.Sprintf(`response_format: %q is not "b64_json"`, req.ResponseFormat))
	case req.OutputFormat != "" && req.OutputFormat != "png":
		return &apiError{Status: http.StatusBadRequest, Code: "unsupported", reason: "output_format",
			Message: fmt.Sprintf(`output_format: %q: this server writes "png"`, req.OutputFormat)}
	case req.PartialImages != 0:
		return &apiError{Status: http.StatusBadRequest, Code: "unsupported", reason: "partial_images",
			Message: "partial_images: previews are not produced; leave it 0 (stream_options.include_progress reports steps)"}
	case req.LoRAScale != nil && (math.IsNaN(*req.LoRAScale) || math.IsInf(*req.LoRAScale, 0)):
		return badRequest("lora_scale: must be finite")
	}
	return nil
}

// pngLevels maps -png-compression onto image/png's levels.
var pngLevels = map[string]png.CompressionLevel{"speed": png.BestSpeed, "default": png.DefaultCompression,
	"best": png.BestCompression, "none": png.NoCompression}

func (s *Server) encodePNGs(images []*cutenative.Image) ([][]byte, *apiError) {
	enc := png.Encoder{CompressionLevel: pngLevels[s.cfg.PNGCompression]} // "" (a Config built by hand): Go's default
	out := make([][]byte, len(images))
	for i, img := range images {
		var b bytes.Buffer
		b.Grow(len(img.Pix)*4/3 + 4096) // a PNG of noise is ~4.1 bytes a pixel; no regrowth copies
		if err := enc.Encode(&b, img.ToNRGBA()); err != nil {
			return nil, &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "the image could not be encoded",
				cause: err}
		}
		out[i] = b.Bytes()
		images[i] = nil // its pixels are the PNG's now
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// streamImages answers with server-sent events: opt-in progress events (event: progress), a keep-alive comment
// every 15 s, then image_generation.completed per image, or an error event if the call fails after the stream began.
func (s *Server) streamImages(w http.ResponseWriter, rq *requestScope, run func() (imageResult, error), progress <-chan [2]uint64,
	req *imageRequest, facts api.ImageFacts, size string, routeMs float64, t0 time.Time) *apiError {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		body, err := json.Marshal(v)
		if err != nil {
			return false
		}
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, body); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	_ = rc.Flush()
	type outcome struct {
		res imageResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := run()
		done <- outcome{res, err}
	}()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	start := time.Now()
	for {
		select {
		case p := <-progress:
			if req.Progress {
				send("progress", map[string]any{"type": "image_generation.progress", "image_index": int(p[0]-1) / max(facts.Steps, 1),
					"step": p[0], "total": p[1], "elapsed_ms": ms(time.Since(start))})
			}
		case <-keep.C:
			_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err == nil {
				_ = rc.Flush()
			}
		case o := <-done:
			if o.err != nil {
				e := fromError(o.err)
				send("error", errorBody(e))
				return nil // the status was sent; the error went as an event
			}
			tEnc := time.Now()
			pngs, e := s.encodePNGs(o.res.images)
			if e != nil {
				send("error", errorBody(e))
				return nil
			}
			facts.Timings = o.res.timings(routeMs, ms(time.Since(tEnc)), t0)
			for i, p := range pngs {
				send("image_generation.completed", map[string]any{"type": "image_generation.completed",
					"b64_json": base64.StdEncoding.EncodeToString(p), "created_at": time.Now().Unix(), "size": size,
					"output_format": "png", "image_index": i, "seed": facts.Seeds[i], "cutenative": facts})
			}
			return nil
		case <-rq.ctx.Done():
			o := <-done // the call ends at its next step (the job's context is the request's)
			_ = o
			return nil
		}
	}
}
