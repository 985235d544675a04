// Command imageclient asks cutenative-server for an image (POST /v1/images/generations) and saves the PNG: the
// wire types are go/api's, so a Go client needs no cgo and no library.
//
//	go run ./imageclient -server http://127.0.0.1:8080 -prompt "a watercolour lighthouse" -lora auto -out $PWD/l.png
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/cutenative/cutenative/go/api"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:8080", "the server's base URL")
	prompt := flag.String("prompt", "", "what to draw")
	size := flag.String("size", "1024x1024", "WIDTHxHEIGHT")
	lora := flag.String("lora", "auto", `"auto", "none" or a name of GET /v1/loras`)
	seed := flag.Int64("seed", 42, "image seed")
	steps := flag.Int("steps", 0, "denoising steps (0: the model's default)")
	key := flag.String("api-key", "", "bearer key, if the server has -api-keys-file")
	out := flag.String("out", "image.png", "the PNG to write")
	timeout := flag.Duration("timeout", 5*time.Minute, "how long to wait")
	flag.Parse()
	if *prompt == "" {
		log.Fatal("-prompt is required")
	}
	body, _ := json.Marshal(api.ImageRequest{Prompt: *prompt, Size: *size, LoRA: *lora, Seed: seed, NumInferenceSteps: *steps})
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", *server+"/v1/images/generations", bytes.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if *key != "" {
		req.Header.Set("Authorization", "Bearer "+*key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err) // cancelling ctx (the timeout) closes the connection: the server stops at the next step
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&e)
		log.Fatalf("%s: %s: %s", resp.Status, e.Error.Code, e.Error.Message)
	}
	var got api.ImagesResponse
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		log.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(got.Data[0].B64JSON)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, png, 0o644); err != nil {
		log.Fatal(err)
	}
	f := got.Cutenative
	applied := "none"
	if len(f.LoRA.Applied) > 0 {
		applied = fmt.Sprintf("%s x %g", f.LoRA.Applied[0].Name, f.LoRA.Applied[0].Scale)
	}
	fmt.Printf("wrote %s: %s, seed %d, %d steps, lora %s (%s), %.0f ms\n", *out, got.Size, got.Data[0].Seed, f.Steps,
		f.LoRA.Decision, applied, f.Timings["total"])
}
