package cutenative

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/internal/testenv"
)

var zimageFixtures = filepath.Join("..", "..", "tests", "fixtures", "zimage")

// zimageCase is one case of tests/fixtures/zimage/cases.json (scripts/make_zimage_fixtures.py): diffusers'
// ZImagePipeline on a tiny pipeline, CPU fp32, seeded with torch.Generator("cpu").manual_seed(seed); its image
// is `<name>.image` (U8 [H, W, 3]) in reference/<config>.safetensors.
type zimageCase struct {
	Name             string          `json:"name"`
	Config           string          `json:"config"`
	Prompt           string          `json:"prompt"`
	NegativePrompt   *string         `json:"negative_prompt"`
	Width            int             `json:"width"`
	Height           int             `json:"height"`
	Steps            int             `json:"steps"`
	Guidance         float32         `json:"guidance"`
	CFGTruncation    float64         `json:"cfg_truncation"`
	CFGNormalization json.RawMessage `json:"cfg_normalization"` // false (off) or a number
	Seed             uint64          `json:"seed"`
}

func (c *zimageCase) normalization(t *testing.T) float64 {
	t.Helper()
	var v any
	if err := json.Unmarshal(c.CFGNormalization, &v); err != nil {
		t.Fatal(err)
	}
	switch x := v.(type) {
	case bool:
		if x {
			t.Fatalf("%s: cfg_normalization true", c.Name)
		}
		return 0
	case float64:
		return x
	}
	t.Fatalf("%s: cfg_normalization %s", c.Name, c.CFGNormalization)
	return 0
}

// request maps a case field for field (every value explicit).
func (c *zimageCase) request(t *testing.T) *GenerateRequest {
	return &GenerateRequest{Prompt: c.Prompt, NegativePrompt: c.NegativePrompt, Width: c.Width, Height: c.Height,
		Steps: c.Steps, Guidance: Ptr(c.Guidance), CFGTruncation: Ptr(c.CFGTruncation), CFGNormalization: c.normalization(t),
		Seed: c.Seed}
}

func (c *zimageCase) reference(t *testing.T) []byte {
	t.Helper()
	img, shape := testenv.SafetensorsU8(t, filepath.Join(zimageFixtures, "reference", c.Config+".safetensors"), c.Name+".image")
	if len(shape) != 3 || shape[0] != int64(c.Height) || shape[1] != int64(c.Width) || shape[2] != 3 {
		t.Fatalf("%s: reference image of shape %v for %dx%d", c.Name, shape, c.Width, c.Height)
	}
	return img
}

func zimageCases(t *testing.T) []zimageCase {
	t.Helper()
	return testenv.Cases[zimageCase](t, filepath.Join(zimageFixtures, "cases.json"))
}

func zimageCaseNamed(t *testing.T, name string) zimageCase {
	t.Helper()
	for _, c := range zimageCases(t) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no Z-Image case %q", name)
	return zimageCase{}
}

// openZImage opens the assembled pipeline of a fixture config (skips without the Qwen3 tokenizer files).
func openZImage(t *testing.T, config string) (*Model, string) {
	t.Helper()
	dir := testenv.ZImagePipeline(t, filepath.Join(zimageFixtures, config))
	m, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, dir
}

// compareImages fails unless got has want's size and at least 99.9 % of its values are within 1 level of it.
func compareImages(t *testing.T, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d bytes, reference %d", len(got), len(want))
	}
	off, worst := 0, 0
	for i := range got {
		d := int(got[i]) - int(want[i])
		if d < 0 {
			d = -d
		}
		if d > 1 {
			off++
		}
		worst = max(worst, d)
	}
	if float64(off) > 0.001*float64(len(got)) {
		t.Fatalf("%d of %d values differ from the reference by more than 1 level (worst %d)", off, len(got), worst)
	}
	t.Logf("%d values, %d beyond 1 level, worst %d", len(got), off, worst)
}

// Every fixture case through Generate: the reference's image within 1 level on >= 99.9 % of the values; the same
// seed gives the same bytes again.
func TestZImageMatchesReference(t *testing.T) {
	models := map[string]*Model{}
	for _, config := range []string{"tiny_a", "tiny_b"} {
		models[config], _ = openZImage(t, config)
	}
	for _, c := range zimageCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			m := models[c.Config]
			if m == nil {
				t.Fatalf("case of an unknown config %q", c.Config)
			}
			img, err := m.Generate(context.Background(), c.request(t))
			if err != nil {
				t.Fatal(err)
			}
			if img.Width != c.Width || img.Height != c.Height || len(img.Pix) != c.Width*c.Height*3 {
				t.Fatalf("image %dx%d with %d bytes, want %dx%d", img.Width, img.Height, len(img.Pix), c.Width, c.Height)
			}
			compareImages(t, img.Pix, c.reference(t))
			again, err := m.Generate(context.Background(), c.request(t))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(img.Pix, again.Pix) {
				t.Fatal("the same request and seed gave different bytes")
			}
		})
	}
}

// The model's facts, and what a request that leaves everything to the model gets: Steps 0 and Guidance nil are
// Info.DefaultSteps (8) and Info.DefaultGuidance (0), the turbo recipe of case a_turbo_32x48; no negative
// prompt equals "" (case a_cfg1_noneg, guidance 1: the negative branch runs).
func TestZImageInfoAndDefaults(t *testing.T) {
	m, _ := openZImage(t, "tiny_a")
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "zimage" || info.ImageSizeMultiple != 16 || info.DefaultSteps != 8 || info.DefaultGuidance != 0 || info.MaxTokens != 512 {
		t.Fatalf("info %+v", info)
	}
	turbo := zimageCaseNamed(t, "a_turbo_32x48")
	if turbo.Steps != 8 || turbo.Guidance != 0 || turbo.NegativePrompt != nil {
		t.Fatalf("case %s is not the turbo recipe", turbo.Name)
	}
	implicit, err := m.Generate(context.Background(), &GenerateRequest{Prompt: turbo.Prompt, Width: turbo.Width, Height: turbo.Height,
		Seed: turbo.Seed})
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := m.Generate(context.Background(), turbo.request(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(implicit.Pix, explicit.Pix) {
		t.Fatal("Steps 0 / Guidance nil differ from steps 8 / guidance 0")
	}
	noNeg := zimageCaseNamed(t, "a_cfg1_noneg")
	withEmpty := noNeg.request(t)
	withEmpty.NegativePrompt = Ptr("")
	a, err := m.Generate(context.Background(), noNeg.request(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Generate(context.Background(), withEmpty)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Pix, b.Pix) {
		t.Fatal("no negative prompt differs from the negative prompt \"\"")
	}
	other := noNeg.request(t)
	other.Seed++
	c, err := m.Generate(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Pix, c.Pix) {
		t.Fatal("seeds 0 and 1 gave the same image")
	}
}

// The binding and a direct C call (testenv.DirectGenerate: the ABI alone, another model instance) give the same
// bytes for the case that sets every field (negative prompt, guidance, cfg truncation and normalisation).
func TestZImageSameBytesAsTheCABI(t *testing.T) {
	c := zimageCaseNamed(t, "a_cfg_trunc_norm_mask")
	m, dir := openZImage(t, c.Config)
	img, err := m.Generate(context.Background(), c.request(t))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := testenv.DirectGenerate(dir, c.Prompt, c.NegativePrompt, c.Width, c.Height, c.Steps, c.Guidance, c.CFGTruncation,
		c.normalization(t), c.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img.Pix, direct) {
		t.Fatal("Generate and the direct C call gave different bytes")
	}
	compareImages(t, direct, c.reference(t))
}

// GenerateImages: Count images in one call, image i the one-image call's with Seed + i (within 1 level on >= 99.9 %
// of the values: the batched kernels may round differently), with and without guidance.
func TestZImageGenerateImages(t *testing.T) {
	for _, name := range []string{"a_turbo_32x48", "a_cfg2p5_neg"} {
		t.Run(name, func(t *testing.T) {
			c := zimageCaseNamed(t, name)
			m, _ := openZImage(t, c.Config)
			req := c.request(t)
			req.Count = 3
			imgs, err := m.GenerateImages(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(imgs) != 3 {
				t.Fatalf("%d images, want 3", len(imgs))
			}
			for i, img := range imgs {
				one := c.request(t)
				one.Seed = c.Seed + uint64(i)
				want, err := m.Generate(context.Background(), one)
				if err != nil {
					t.Fatal(err)
				}
				if img.Width != c.Width || img.Height != c.Height {
					t.Fatalf("image %d: %dx%d", i, img.Width, img.Height)
				}
				compareImages(t, img.Pix, want.Pix)
			}
			if bytes.Equal(imgs[0].Pix, imgs[1].Pix) {
				t.Fatal("images 0 and 1 are the same")
			}
		})
	}
}

// Bad requests are ErrInvalidArgument (ErrNotFound for a LoRA file that does not exist), name the field, and leave
// the model usable: after each, a good request gives the same bytes as before.
func TestZImageRequestErrors(t *testing.T) {
	m, _ := openZImage(t, "tiny_a")
	good := &GenerateRequest{Prompt: "a lighthouse at night", Width: 16, Height: 16, Steps: 2, Seed: 3}
	want, err := m.Generate(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	bad := func(edit func(r *GenerateRequest)) *GenerateRequest {
		r := *good
		edit(&r)
		return &r
	}
	tests := []struct {
		name    string
		req     *GenerateRequest
		want    error
		message string
	}{
		{"nil request", nil, ErrInvalidArgument, "request is nil"},
		{"width not a multiple of 16", bad(func(r *GenerateRequest) { r.Width = 24 }), ErrInvalidArgument, "width: 24 is not a positive multiple of 16"},
		{"height not a multiple of 16", bad(func(r *GenerateRequest) { r.Height = 8 }), ErrInvalidArgument, "height: 8"},
		{"width past 4096", bad(func(r *GenerateRequest) { r.Width = 4112 }), ErrInvalidArgument, "width: must be in [1, 4096]"},
		{"negative height", bad(func(r *GenerateRequest) { r.Height = -16 }), ErrInvalidArgument, "height"},
		{"width past int32", bad(func(r *GenerateRequest) { r.Width = 1 << 32 }), ErrInvalidArgument, "does not fit in int32"},
		{"steps -5", bad(func(r *GenerateRequest) { r.Steps = -5 }), ErrInvalidArgument, "steps"},
		{"steps -1 (the C default marker)", bad(func(r *GenerateRequest) { r.Steps = -1 }), ErrInvalidArgument, "steps"},
		{"steps 1001", bad(func(r *GenerateRequest) { r.Steps = 1001 }), ErrInvalidArgument, "steps: must be in [1, 1000]"},
		{"NaN guidance", bad(func(r *GenerateRequest) { r.Guidance = Ptr(float32(math.NaN())) }), ErrInvalidArgument, "guidance: must be finite"},
		{"infinite guidance", bad(func(r *GenerateRequest) { r.Guidance = Ptr(float32(math.Inf(1))) }), ErrInvalidArgument, "guidance: must be finite"},
		{"negative guidance", bad(func(r *GenerateRequest) { r.Guidance = Ptr[float32](-1) }), ErrInvalidArgument, "guidance: must be >= 0"},
		{"NaN truncation", bad(func(r *GenerateRequest) { r.CFGTruncation = Ptr(math.NaN()) }), ErrInvalidArgument, "truncation"},
		{"negative normalization", bad(func(r *GenerateRequest) { r.CFGNormalization = -1 }), ErrInvalidArgument, "normalization"},
		{"prompt over 65536 bytes", bad(func(r *GenerateRequest) { r.Prompt = strings.Repeat("a", MaxPromptBytes+1) }), ErrInvalidArgument,
			"prompt: 65537 bytes"},
		{"negative prompt over 65536 bytes", bad(func(r *GenerateRequest) { r.NegativePrompt = Ptr(strings.Repeat("b", MaxPromptBytes+1)) }),
			ErrInvalidArgument, "negative_prompt"},
		{"invalid UTF-8 prompt", bad(func(r *GenerateRequest) { r.Prompt = "a fox \xff\xfe in the snow" }), ErrInvalidArgument, "prompt"},
		{"invalid UTF-8 negative prompt", bad(func(r *GenerateRequest) { r.NegativePrompt, r.Guidance = Ptr("\xc3("), Ptr[float32](2) }),
			ErrInvalidArgument, "negative_prompt"},
		{"NUL in the prompt", bad(func(r *GenerateRequest) { r.Prompt = "a\x00b" }), ErrInvalidArgument, "NUL"},
		{"a LoRA file that does not exist", bad(func(r *GenerateRequest) { r.LoRAPath, r.LoRAScale = "/nonexistent/style.safetensors", 0.8 }),
			ErrNotFound, "/nonexistent/style.safetensors"},
		{"a nil adapter", bad(func(r *GenerateRequest) { r.Adapters = []AdapterUse{{Scale: 1}} }), ErrInvalidArgument, "adapters[0]: nil"},
		{"NaN LoRA scale", bad(func(r *GenerateRequest) { r.LoRAPath, r.LoRAScale = "/tmp/style.safetensors", float32(math.NaN()) }),
			ErrInvalidArgument, "scale"},
		{"negative count", bad(func(r *GenerateRequest) { r.Count = -1 }), ErrInvalidArgument, "count: must be in [1, 16]"},
		{"count past the most", bad(func(r *GenerateRequest) { r.Count = MaxImagesPerCall + 1 }), ErrInvalidArgument, "count"},
		{"several images through Generate", bad(func(r *GenerateRequest) { r.Count = 2 }), ErrInvalidArgument, "need GenerateImages"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img, err := m.Generate(context.Background(), tc.req)
			if !errors.Is(err, tc.want) || img != nil {
				t.Fatalf("error %v (image %v), want %v", err, img != nil, tc.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Op != "Generate" {
				t.Fatalf("error %T %v is not a Generate *Error", err, err)
			}
			mustContain(t, ce.Message, tc.message)
			after, err := m.Generate(context.Background(), good)
			if err != nil || !bytes.Equal(after.Pix, want.Pix) {
				t.Fatalf("the good request afterwards: %v (same bytes %v)", err, err == nil && bytes.Equal(after.Pix, want.Pix))
			}
		})
	}
}

// Cancellation and deadlines: before the call (ctx.Err(), nothing runs), during it (cancelled from the progress
// report after the first step: context.Canceled and ErrCancelled), a deadline that passes during a long run
// (context.DeadlineExceeded and ErrDeadlineExceeded); the model stays usable.
func TestZImageContext(t *testing.T) {
	m, _ := openZImage(t, "tiny_a")
	req := &GenerateRequest{Prompt: "a red fox in the snow", Width: 16, Height: 16, Steps: 1000}

	before, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Generate(before, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before: %v", err)
	}
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	if _, err := m.Generate(past, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline passed before: %v", err)
	}

	during, cancelDuring := context.WithCancel(context.Background())
	defer cancelDuring()
	var reports [][2]uint64 // written by the reports, which never overlap; read after the call returned
	start := time.Now()
	_, err := m.GenerateWithOptions(during, req, &GenerateOptions{ProgressInterval: time.Millisecond, Progress: func(done, total uint64) {
		reports = append(reports, [2]uint64{done, total})
		if done >= 1 {
			cancelDuring()
		}
	}})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrCancelled) {
		t.Fatalf("cancelled during: %v", err)
	}
	if len(reports) == 0 {
		t.Fatal("no progress before the cancel")
	}
	last := reports[len(reports)-1]
	if last[1] != 1000 || last[0] < 1 || last[0] >= 1000 {
		t.Fatalf("progress at the end of a cancelled call %v (reports %v)", last, reports)
	}
	t.Logf("cancelled after %d of 1000 steps, %v", last[0], time.Since(start))

	timed, cancelTimed := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelTimed()
	if _, err := m.Generate(timed, req); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrDeadlineExceeded) {
		t.Fatalf("deadline during: %v", err)
	}
	if _, err := m.Generate(context.Background(), &GenerateRequest{Prompt: "a fox", Width: 16, Height: 16, Steps: 1}); err != nil {
		t.Fatalf("after the cancelled calls: %v", err)
	}
}

// Progress counts denoising steps: it never goes back, its total is the request's steps (the model's default
// for Steps 0), and the last report of a successful call is steps/steps.
func TestZImageProgress(t *testing.T) {
	m, _ := openZImage(t, "tiny_a")
	for _, steps := range []int{3, 0} {
		t.Run(fmt.Sprintf("steps %d", steps), func(t *testing.T) {
			total := uint64(steps)
			if steps == 0 {
				total = 8
			}
			var reports [][2]uint64
			_, err := m.GenerateWithOptions(context.Background(), &GenerateRequest{Prompt: "a red fox", Width: 32, Height: 32, Steps: steps},
				&GenerateOptions{ProgressInterval: time.Millisecond, Progress: func(done, total uint64) {
					reports = append(reports, [2]uint64{done, total})
				}})
			if err != nil {
				t.Fatal(err)
			}
			if len(reports) == 0 || reports[len(reports)-1] != [2]uint64{total, total} {
				t.Fatalf("reports %v, want the last %d/%d", reports, total, total)
			}
			for i, r := range reports {
				if r[1] != total || r[0] > total || (i > 0 && r[0] <= reports[i-1][0]) {
					t.Fatalf("reports %v", reports)
				}
			}
		})
	}
}

// Concurrent calls on one model give each request's own bytes.
func TestZImageConcurrentCalls(t *testing.T) {
	m, _ := openZImage(t, "tiny_a")
	reqs := []*GenerateRequest{
		{Prompt: "a red fox", Width: 16, Height: 32, Steps: 2, Seed: 1},
		{Prompt: "a blue whale", Width: 32, Height: 16, Steps: 2, Seed: 2, Guidance: Ptr[float32](2), NegativePrompt: Ptr("blurry")},
		{Prompt: "a green tree", Width: 16, Height: 16, Steps: 3, Seed: 3},
	}
	want := make([][]byte, len(reqs))
	for i, r := range reqs {
		img, err := m.Generate(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = img.Pix
	}
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			img, err := m.Generate(context.Background(), reqs[i])
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(img.Pix, want[i]) {
				t.Errorf("request %d: concurrent bytes differ from sequential", i)
			}
		}(g % len(reqs))
	}
	wg.Wait()
}

// ToNRGBA keeps every pixel, is opaque, and encodes as a PNG that decodes to the same pixels.
func TestImageToNRGBA(t *testing.T) {
	img := &Image{Width: 3, Height: 2, Pix: []byte{
		0, 1, 2, 10, 11, 12, 20, 21, 22,
		255, 254, 253, 128, 64, 32, 7, 8, 9,
	}}
	n := img.ToNRGBA()
	if n.Bounds().Dx() != 3 || n.Bounds().Dy() != 2 {
		t.Fatalf("bounds %v", n.Bounds())
	}
	for y := 0; y < 2; y++ {
		for x := 0; x < 3; x++ {
			c := n.NRGBAAt(x, y)
			p := img.Pix[(y*3+x)*3:]
			if c.R != p[0] || c.G != p[1] || c.B != p[2] || c.A != 255 {
				t.Fatalf("(%d, %d): %v, want %v", x, y, c, p[:3])
			}
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, n); err != nil {
		t.Fatal(err)
	}
	back, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for y := 0; y < 2; y++ {
		for x := 0; x < 3; x++ {
			r, g, b, a := back.At(x, y).RGBA()
			p := img.Pix[(y*3+x)*3:]
			if uint8(r>>8) != p[0] || uint8(g>>8) != p[1] || uint8(b>>8) != p[2] || a != 0xffff {
				t.Fatalf("PNG round trip at (%d, %d)", x, y)
			}
		}
	}
}

// LoRA adapters through the binding, on the reference-made adapter files of tests/fixtures/zimage/lora: an adapter
// loaded once and named by requests gives the image set_lora's path gives, and the reference's within the parity
// tolerance; the base image comes back after it; an adapter outside the allowed directory or of a refused kind is
// the library's error naming it; a closed adapter is refused; stats count the switches.
func TestZImageAdapters(t *testing.T) {
	m, _ := openZImage(t, "tiny_a")
	dir, err := filepath.Abs(filepath.Join("..", "..", "tests", "fixtures", "zimage", "lora"))
	if err != nil {
		t.Fatal(err)
	}
	var cases struct {
		Cases []struct {
			Name     string `json:"name"`
			Config   string `json:"config"`
			Adapters []struct {
				File  string  `json:"file"`
				Scale float32 `json:"user_scale"`
			} `json:"adapters"`
		} `json:"cases"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	base := zimageCaseNamed(t, "a_turbo_32x48")
	req := base.request(t)
	plain, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	c := cases.Cases[0] // peft_attn: a diffusers/PEFT file on the base case
	if c.Name != "peft_attn" || c.Config != "tiny_a" {
		t.Fatalf("fixture case 0 is %s on %s", c.Name, c.Config)
	}
	a, err := m.LoadAdapter(filepath.Join(dir, c.Adapters[0].File), &AdapterOptions{AllowedDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if info := a.Info(); info.Family != "diffusers/peft" || info.Targets != 16 || info.MaxRank != 4 || info.FactorBytes == 0 {
		t.Fatalf("info %+v", info)
	}
	with := *req
	with.Adapters = []AdapterUse{{Adapter: a, Scale: c.Adapters[0].Scale}}
	got, err := m.Generate(context.Background(), &with)
	if err != nil {
		t.Fatal(err)
	}
	byPath := *req
	byPath.LoRAPath, byPath.LoRAScale = filepath.Join(dir, c.Adapters[0].File), c.Adapters[0].Scale
	again, err := m.Generate(context.Background(), &byPath)
	if err != nil || !bytes.Equal(again.Pix, got.Pix) {
		t.Fatalf("set_lora's path: %v (same bytes %v)", err, err == nil && bytes.Equal(again.Pix, got.Pix))
	}
	if bytes.Equal(got.Pix, plain.Pix) {
		t.Fatal("the adapter changed nothing")
	}
	ref, _ := testenv.SafetensorsU8(t, filepath.Join(dir, "reference.safetensors"), c.Name+".image")
	compareImages(t, got.Pix, ref)
	if after, err := m.Generate(context.Background(), req); err != nil || !bytes.Equal(after.Pix, plain.Pix) {
		t.Fatalf("the base image after the adapter: %v", err)
	}
	st, err := m.AdapterStats()
	if err != nil || st.Switches < 3 || st.BackupBytes == 0 || st.Touched != 0 {
		t.Fatalf("stats %+v %v", st, err)
	}
	// Refusals.
	other := t.TempDir()
	if _, err := m.LoadAdapter(filepath.Join(dir, c.Adapters[0].File), &AdapterOptions{AllowedDir: other}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("outside the allowed directory: %v", err)
	}
	if _, err := m.LoadAdapter(filepath.Join(dir, "neg_dora_peft.safetensors"), nil); !errors.Is(err, ErrUnsupported) ||
		!strings.Contains(err.Error(), "lora_magnitude_vector") {
		t.Fatalf("DoRA: %v", err)
	}
	a.Close()
	a.Close()
	if _, err := m.Generate(context.Background(), &with); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a closed adapter: %v", err)
	}
	forecaster, err := Open(filepath.Join("..", "cmd", "cutenative-server", "defaultmodel"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer forecaster.Close()
	if _, err := forecaster.LoadAdapter(filepath.Join(dir, c.Adapters[0].File), nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("an adapter on a forecaster: %v", err)
	}
}
