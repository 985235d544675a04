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
	"errors"
	"fmt"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
	byFile map[adapterFile]*cutenative.Adapter // the same adapters by file: a reload reuses an unchanged file's
}

// adapterFile names an adapter file's contents as a reload sees them: the path, its size and modification time.
type adapterFile struct {
	path  string
	size  int64
	mtime time.Time
}

// attachAdapters loads every entry's adapter file under Config.LoRADir against the image model (the catalog
// registry's attach hook): a file that is missing, escapes the directory or does not fit the model refuses the
// catalog, naming the entry. A reload reuses the adapters of files that did not change (path, size, mtime); the
// ones the new catalog drops are freed after a grace period (2 × Timeout, so requests that picked them finish),
// and a refused catalog frees only what it loaded itself.
func (s *Server) attachAdapters(ctx context.Context, cat *lora.Catalog) (any, error) {
	if s.cfg.LoRADir == "" {
		return nil, nil
	}
	m, e := s.find("", capGenerate)
	if e != nil || m.model == nil {
		return nil, nil // no image model: the catalog serves search only
	}
	s.adaptersMu.Lock()
	defer s.adaptersMu.Unlock()
	if s.adaptersClosed {
		return nil, errors.New("the server is closing")
	}
	prev := s.adapters
	out := &catalogAdapters{model: m.name, byName: map[string]*cutenative.Adapter{}, byFile: map[adapterFile]*cutenative.Adapter{}}
	var loaded []*cutenative.Adapter // by this call: freed again if the catalog is refused
	refuse := func(err error) (any, error) {
		for _, a := range loaded {
			a.Close()
		}
		return nil, err
	}
	for _, entry := range cat.Entries {
		if err := ctx.Err(); err != nil {
			return refuse(err)
		}
		if entry.Path == "" {
			continue
		}
		path := entry.Path
		if !filepath.IsAbs(path) {
			path = filepath.Join(s.cfg.LoRADir, path)
		}
		key := adapterFile{path: filepath.Clean(path)}
		if fi, err := os.Stat(path); err == nil {
			key.size, key.mtime = fi.Size(), fi.ModTime()
		} // a missing file: LoadAdapter names the error
		a := out.byFile[key]
		if a == nil && prev != nil && prev.model == m.name {
			a = prev.byFile[key]
		}
		if a == nil {
			var err error
			if a, err = m.model.LoadAdapter(path, &cutenative.AdapterOptions{AllowedDir: s.cfg.LoRADir}); err != nil {
				return refuse(fmt.Errorf("entry %q: %w", entry.Name, err))
			}
			loaded = append(loaded, a)
		}
		out.byName[entry.Name] = a
		out.byFile[key] = a
	}
	if prev != nil {
		var dropped []*cutenative.Adapter
		for key, a := range prev.byFile {
			if out.byFile[key] != a {
				dropped = append(dropped, a)
			}
		}
		if len(dropped) > 0 {
			s.closeLater(dropped)
		}
	}
	s.adapters = out
	return out, nil
}

// closeLater frees adapters a reload dropped once requests that picked them before the reload are done: after
// 2 × Timeout (a request that holds one has its own reference in the library by then), or at Close.
func (s *Server) closeLater(as []*cutenative.Adapter) {
	grace := 2 * s.cfg.Timeout
	if s.adapterGrace > 0 {
		grace = s.adapterGrace
	}
	s.retired = append(s.retired, as...)
	time.AfterFunc(grace, func() {
		s.adaptersMu.Lock()
		defer s.adaptersMu.Unlock()
		for _, a := range as {
			a.Close() // idempotent: Close may have freed it already
		}
		keep := s.retired[:0]
		for _, r := range s.retired {
			if !slices.Contains(as, r) {
				keep = append(keep, r)
			}
		}
		s.retired = keep
	})
}

// closeAdapters frees every adapter the server holds (Close, before the models).
func (s *Server) closeAdapters() {
	s.adaptersMu.Lock()
	defer s.adaptersMu.Unlock()
	s.adaptersClosed = true
	if s.adapters != nil {
		for _, a := range s.adapters.byFile {
			a.Close()
		}
		s.adapters = nil
	}
	for _, a := range s.retired {
		a.Close()
	}
	s.retired = nil
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
	vec, e := s.promptVector(rq, emb, req.Prompt)
	if e != nil {
		return nil, e
	}
	// The best candidates: enough for lora_max, and at most 10 listed in the answer.
	res, err := router.SearchEmbedding(vec, min(len(router.Catalog().Entries), max(10, s.cfg.MaxLoRAs)))
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
		out.decision.Candidates = append(out.decision.Candidates, wireCandidate(c))
		if c.Score >= threshold && len(out.uses) < limit {
			if e := apply(out, c.Name, nil); e != nil {
				return nil, e
			}
			out.decision.Decision = "routed"
		}
	}
	return out, nil
}

// imageWork: per image and step, a transformer pass over the image's patch tokens, two with classifier-free
// guidance (the negative prompt's batch item). Its caption's tokens (at most 512) and the VAE decoder, once per
// image, fall into the per-pass and per-unit costs the probes measure: an estimate that errs long for many steps.
// Attention's share grows with the tokens squared: sizes past the larger probe are estimated short.
func imageWork(m *servedModel, w, h, steps, n int, guided bool) work {
	mult := int64(max(m.info.ImageSizeMultiple, 1))
	tokens := (int64(w) / mult) * (int64(h) / mult)
	passes := int64(n) * int64(steps)
	if guided {
		passes *= 2
	}
	return work{passes: passes, units: passes * tokens, what: fmt.Sprintf("%d image(s) of %dx%d, %d steps", n, w, h, steps)}
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
		return probe{w: imageWork(m, side, side, 1, 1, false), run: func(ctx context.Context) error {
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
	pngAnswer := strings.Contains(r.Header.Get("Accept"), "image/png") && !req.Stream
	if e := s.checkImageRequest(m, req, pngAnswer); e != nil {
		return e
	}
	steps := req.Steps
	if steps == 0 {
		steps = int(max(m.info.DefaultSteps, 1))
	}
	gen := cutenative.GenerateRequest{Prompt: req.Prompt, NegativePrompt: req.NegativePrompt, Width: req.Width, Height: req.Height,
		Steps: steps}
	guidance := float64(m.info.DefaultGuidance)
	if req.Guidance != nil {
		guidance = *req.Guidance
		g := float32(guidance)
		gen.Guidance = &g
	}
	// The library's own checks (sizes against the model's position range) before anything is queued.
	if _, err := m.model.CheckGenerate(&gen); err != nil {
		return fromError(err)
	}
	seed := int64(freshSeed() >> 11) // drawn below 2^53, so that any JSON client reads it back exactly; echoed
	if req.Seed != nil && *req.Seed >= 0 {
		seed = *req.Seed
	}
	// The answer's bytes: per image its RGB pixels (3 a pixel) until its PNG (at most ~4.1 a pixel, kept until
	// written) replaces them, plus one RGBA copy (4 a pixel) while encoding; base64 is streamed to the client.
	pixels := int64(req.Width) * int64(req.Height)
	if err := rq.acct.charge(int64(req.N)*pixels*8 + pixels*4); err != nil {
		return fromError(err)
	}
	// The adapters first ("auto" embeds the prompt through the embedding model's own lanes), so that the image's
	// admission below weighs the time actually left.
	tRoute := time.Now()
	plan, e := s.resolveLoRA(rq, m, req)
	if e != nil {
		return e
	}
	routeMs := ms(time.Since(tRoute))
	gen.Adapters = plan.uses
	wk := imageWork(m, req.Width, req.Height, steps, req.N, guidance > 0)
	est := estimate{work: wk, seconds: m.cost.seconds(wk)}
	lane, e := s.admission(rq.ctx, m, est)
	if e != nil {
		return e
	}
	progress := make(chan [2]uint64, 16)
	submitted := time.Now()
	wait, err := submitAlone(rq.ctx, lane, 0, est.seconds, func(ctx context.Context) (imageResult, error) {
		return s.generateImages(ctx, m, &gen, req.N, steps, seed, submitted, progress)
	})
	if err != nil {
		return fromError(err)
	}
	facts := api.ImageFacts{Model: m.name, Steps: steps, GuidanceScale: guidance, Seeds: make([]int64, req.N), LoRA: plan.decision}
	for i := range facts.Seeds {
		facts.Seeds[i] = seed + int64(i)
	}
	size := fmt.Sprintf("%dx%d", req.Width, req.Height)
	if req.Stream {
		return s.streamImages(w, rq, wait, progress, req, facts, size, routeMs, t0)
	}
	res, err := wait()
	if err != nil {
		return fromError(err)
	}
	tEnc := time.Now()
	pngs, e := s.encodePNGs(res.images)
	if e != nil {
		return e
	}
	facts.Timings = res.timings(routeMs, ms(time.Since(tEnc)), t0)
	if pngAnswer {
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("X-Cutenative-Seed", strconv.FormatInt(seed, 10))
		head := facts
		head.LoRA.Candidates = nil // a header stays small: the decision and what was applied
		if body, err := json.Marshal(head); err == nil {
			w.Header().Set("X-Cutenative", string(body))
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(pngs[0])
		return nil
	}
	return writeImagesJSON(w, size, pngs, facts)
}

// generateImages is the job: n library calls, image i seeded seed + i, reporting progress over all their steps.
func (s *Server) generateImages(ctx context.Context, m *servedModel, gen *cutenative.GenerateRequest, n, steps int, seed int64,
	submitted time.Time, progress chan<- [2]uint64) (imageResult, error) {
	res := imageResult{queueMs: ms(time.Since(submitted))}
	start := time.Now()
	total := uint64(n * steps)
	var last atomic.Uint64 // steps reported
	atCancel := make(chan uint64, 1)
	stop := context.AfterFunc(ctx, func() { atCancel <- last.Load() })
	defer func() {
		if stop() {
			return
		}
		at := <-atCancel // the callback has run (or is running): wait for its value
		end := last.Load()
		s.logger().Info("image generation cancelled", "model", m.name, "steps_at_cancel", at, "steps_at_end", end, "steps", total)
		if s.imageCancelled != nil {
			s.imageCancelled(at, end, total)
		}
	}()
	// report publishes the request's progress in steps of one image (n x steps in all).
	report := func(step uint64) {
		last.Store(step)
		reportProgress(ctx, step, total)
		select {
		case progress <- [2]uint64{step, total}:
		default: // a slow reader loses progress events, never the image
		}
	}
	if s.cfg.BatchImages && n > 1 {
		// One call: its steps denoise every image at once (progress counts n per step).
		g := *gen
		g.Seed, g.Count = uint64(seed), n
		imgs, err := m.model.GenerateImages(ctx, &g, &cutenative.GenerateOptions{ProgressInterval: 10 * time.Millisecond,
			Progress: func(done, _ uint64) { report(done * uint64(n)) }})
		if err != nil {
			return res, err
		}
		res.images, res.lib = imgs, imgs[0].Timings
	}
	for i := 0; len(res.images) < n; i++ { // one image a call (none left after a batched call)
		g := *gen
		g.Seed = uint64(seed) + uint64(i)
		img, err := m.model.GenerateWithOptions(ctx, &g, &cutenative.GenerateOptions{ProgressInterval: 10 * time.Millisecond,
			Progress: func(done, _ uint64) { report(uint64(i*steps) + done) }})
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
	s.metrics.countImages(m.name, n, n*steps, res.lib.Denoise/1000)
	return res, nil
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
func (s *Server) checkImageRequest(m *servedModel, req *imageRequest, pngAnswer bool) *apiError {
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
	case req.Seed != nil && *req.Seed > math.MaxInt64-int64(req.N-1):
		return badRequest(fmt.Sprintf("seed: image i uses seed + i: at most %d for n = %d", math.MaxInt64-int64(req.N-1), req.N))
	case pngAnswer && req.N != 1:
		return badRequest("n: Accept: image/png answers one image; ask for n = 1 or for JSON")
	}
	return nil
}

// pngLevels maps -png-compression onto image/png's levels.
var pngLevels = map[string]png.CompressionLevel{"speed": png.BestSpeed, "default": png.DefaultCompression,
	"best": png.BestCompression, "none": png.NoCompression}

// pngSlots bounds the PNG encodings running at once (each is a core's work: ~0.1-0.3 s a megapixel) to the cores.
var pngSlots = make(chan struct{}, runtime.GOMAXPROCS(0))

func (s *Server) encodePNGs(images []*cutenative.Image) ([][]byte, *apiError) {
	enc := png.Encoder{CompressionLevel: pngLevels[s.cfg.PNGCompression]} // "" (a Config built by hand): Go's default
	out := make([][]byte, len(images))
	pngSlots <- struct{}{}
	defer func() { <-pngSlots }()
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

// streamImages answers with server-sent events (the job already admitted, so a full queue was still a 429): opt-in
// progress events (event: image_generation.progress), a keep-alive comment every 15 s, then one
// image_generation.completed per image, or an error event if the call fails (or the deadline passes) after the
// stream began.
func (s *Server) streamImages(w http.ResponseWriter, rq *requestScope, wait func() (imageResult, error), progress <-chan [2]uint64,
	req *imageRequest, facts api.ImageFacts, size string, routeMs float64, t0 time.Time) *apiError {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	event := func(name string, write func() error) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: ", name); err != nil {
			return false
		}
		if err := write(); err != nil {
			return false
		}
		if _, err := io.WriteString(w, "\n\n"); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	sendJSON := func(name string, v any) bool {
		body, err := json.Marshal(v)
		if err != nil {
			return false
		}
		return event(name, func() error { _, err := w.Write(body); return err })
	}
	type outcome struct {
		res imageResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := wait()
		done <- outcome{res, err}
	}()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	start := time.Now()
	finish := func(o outcome) *apiError {
		if o.err != nil {
			sendJSON("error", errorBody(fromError(o.err)))
			return nil // the status was sent; the error went as an event
		}
		tEnc := time.Now()
		pngs, e := s.encodePNGs(o.res.images)
		if e != nil {
			sendJSON("error", errorBody(e))
			return nil
		}
		facts.Timings = o.res.timings(routeMs, ms(time.Since(tEnc)), t0)
		tail, err := json.Marshal(facts)
		if err != nil {
			return nil
		}
		for i, p := range pngs {
			// Written by hand so that the base64 streams from the PNG (as the JSON answer does).
			ok := event("image_generation.completed", func() error {
				if _, err := fmt.Fprintf(w, `{"type":"image_generation.completed","created_at":%d,"size":%q,"output_format":"png","image_index":%d,"seed":%d,"b64_json":"`,
					time.Now().Unix(), size, i, facts.Seeds[i]); err != nil {
					return err
				}
				enc := base64.NewEncoder(base64.StdEncoding, w)
				if _, err := enc.Write(p); err != nil {
					return err
				}
				if err := enc.Close(); err != nil {
					return err
				}
				_, err := fmt.Fprintf(w, `","cutenative":%s}`, tail)
				return err
			})
			pngs[i] = nil
			if !ok {
				return nil
			}
		}
		return nil
	}
	for {
		select {
		case p := <-progress:
			if req.Progress {
				sendJSON("image_generation.progress", map[string]any{"type": "image_generation.progress",
					"image_index": int(p[0]-1) / max(facts.Steps, 1), "step": p[0], "total": p[1], "elapsed_ms": ms(time.Since(start))})
			}
		case <-keep.C:
			_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err == nil {
				_ = rc.Flush()
			}
		case o := <-done:
			return finish(o)
		case <-rq.ctx.Done():
			// The job ends at its next step. A client that went away reads nothing more; past the deadline the
			// outcome is sent (the deadline's error event, or images that finished at that instant).
			o := <-done
			if errors.Is(rq.ctx.Err(), context.Canceled) {
				return nil
			}
			return finish(o)
		}
	}
}
