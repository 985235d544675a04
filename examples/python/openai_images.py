#!/usr/bin/env python3
"""An image from cutenative-server through the official OpenAI Python client (pip install openai), unchanged.

    python3 examples/python/openai_images.py --base-url http://127.0.0.1:8080/v1 --prompt "..." --out lighthouse.png

cutenative's own fields (lora, seed, num_inference_steps, ...) go in `extra_body`; its account of the answer (the
LoRA decision with every candidate's score, the seeds, the timings) is the answer's "cutenative" object, which the
client keeps as an extra field."""
import argparse
import base64
import json

from openai import OpenAI


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--api-key", default="unused", help="a key of -api-keys-file, if the server has any")
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--size", default="1024x1024")
    ap.add_argument("--lora", default="auto", help='"auto", "none" or a name of GET /v1/loras')
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--steps", type=int, default=0, help="0: the model's default")
    ap.add_argument("--out", required=True, help="the PNG to write")
    args = ap.parse_args()

    client = OpenAI(base_url=args.base_url, api_key=args.api_key)
    extra = {"lora": args.lora, "seed": args.seed}
    if args.steps:
        extra["num_inference_steps"] = args.steps
    resp = client.images.generate(prompt=args.prompt, size=args.size, n=1, response_format="b64_json", extra_body=extra)
    with open(args.out, "wb") as f:
        f.write(base64.b64decode(resp.data[0].b64_json))
    facts = (resp.model_extra or {}).get("cutenative", {})
    lora = facts.get("lora", {})
    applied = ", ".join(f"{a['name']} x {a['scale']:g}" for a in lora.get("applied", [])) or "none"
    print(f"wrote {args.out}: {resp.size}, seed {facts.get('seeds')}, lora {lora.get('decision')} ({applied})")
    for c in lora.get("candidates", [])[:3]:
        print(f"  candidate {c['name']}: score {c['score']:.3f}")
    print("  timings_ms " + json.dumps(facts.get("timings_ms", {}), sort_keys=True))


if __name__ == "__main__":
    main()
