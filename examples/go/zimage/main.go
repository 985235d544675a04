// Z-Image Turbo in process from Go: generate one image from a prompt and write it as a PNG.
//
//	go run ./zimage -model <pipeline_dir> -prompt "a red fox in the snow" -out fox.png   (scripts/go.sh sets the cgo flags; see README)
//
// The model directory is diffusers' layout of Tongyi-MAI/Z-Image-Turbo (model_index.json, text_encoder/,
// tokenizer/, transformer/, vae/, scheduler/), read from disk: nothing is downloaded.
package main

import (
	"context"
	"flag"
	"fmt"
	"image/png"
	"os"
	"os/signal"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
)

func main() {
	model := flag.String("model", "", "Z-Image pipeline directory (diffusers layout; required)")
	prompt := flag.String("prompt", "", "what to draw")
	negative := flag.String("negative", "", "negative prompt (used only with guidance > 0; default: none)")
	width := flag.Int("width", 1024, "width in pixels (a multiple of the model's size multiple, 16 for Z-Image Turbo)")
	height := flag.Int("height", 1024, "height in pixels (likewise)")
	steps := flag.Int("steps", 0, "denoising steps (0: the model's default, 8 for Z-Image Turbo)")
	guidance := flag.Float64("guidance", 0, "classifier-free guidance scale; 0 turns it off (default: the model's, 0 for Z-Image Turbo)")
	seed := flag.Uint64("seed", 0, "seed of the initial noise")
	out := flag.String("out", "image.png", "PNG to write")
	device := flag.String("device", "cpu", "cpu, cuda or cuda:N")
	dtype := flag.String("dtype", "", "f32 (default), bf16 or f16 (bf16 is the reference's dtype on CUDA)")
	flag.Parse()
	if *model == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: zimage -model <pipeline_dir> -prompt <text> [-negative <text>] [-width W] [-height H] [-steps N] [-guidance G] [-seed S] [-out image.png]")
		os.Exit(2)
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })

	m, err := cutenative.Open(*model, &cutenative.Options{Device: *device, DType: *dtype})
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // errors.Is(err, cutenative.ErrNotFound) etc. tell the cause
		os.Exit(1)
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	req := &cutenative.GenerateRequest{Prompt: *prompt, Width: *width, Height: *height, Steps: *steps, Seed: *seed}
	if set["negative"] {
		req.NegativePrompt = negative
	}
	g := info.DefaultGuidance
	if set["guidance"] {
		g = float32(*guidance)
		req.Guidance = &g
	}
	n := *steps
	if n == 0 {
		n = int(info.DefaultSteps)
	}

	// Ctrl-C cancels between denoising steps.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	img, err := m.GenerateWithOptions(ctx, req, &cutenative.GenerateOptions{
		ProgressInterval: 500 * time.Millisecond,
		Progress: func(done, total uint64) {
			fmt.Fprintf(os.Stderr, "\rstep %d/%d", done, total)
			if done == total {
				fmt.Fprintln(os.Stderr)
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	elapsed := time.Since(start)

	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := png.Encode(f, img.ToNRGBA()); err != nil {
		f.Close()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s: %dx%d, %d steps, guidance %g, seed %d, %s on %s (%s) in %.2f s\n", *out, img.Width, img.Height, n, g, *seed,
		info.Kind, info.Device, info.DType, elapsed.Seconds())
}
