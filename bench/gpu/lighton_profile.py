"""Where LightOnOCR-2's time goes on one GPU: its Pixtral image encoder's attention, and preprocessing.

    python3 -m bench.gpu.lighton_profile --model MODELS/lightonocr_2_1b --source PDFS --out X.json

vLLM 0.25 without xformers runs the Pixtral encoder's attention over a dense block-diagonal mask
covering every image of a step (``chandra_ocr.ocr.vllm_pixtral``). This times, at the real
encoder's dimensions (24 layers, 16 heads of 64) and a real page's patch count, the attention as
vLLM 0.25 runs it against one FlashAttention call per image, for 1–3 images a step, and names the
kernels ``torch.profiler`` saw. It also times the image processor vLLM's front end runs per page
(in the process that calls ``LLM.chat`` / ``enqueue_chat``) on rendered corpus pages.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.models.shapes import SHAPES

_VISION = SHAPES["lightonocr_2_1b"].config["vision_config"]  # lightonai/LightOnOCR-2-1B
LAYERS, HEADS, HEAD_DIM = (_VISION[k] for k in ("num_hidden_layers", "num_attention_heads", "head_dim"))


def timed(fn, repeats: int = 5) -> float:
    """Median seconds of ``fn`` on the GPU (CUDA events), after one warm-up call."""
    import torch

    fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return sorted(times)[len(times) // 2]


def attention_cases(patches: int) -> dict:
    """Encoder attention seconds per image (all 24 layers), dense mask vs per image, 1–3 images a step."""
    import torch
    from torch.nn.functional import scaled_dot_product_attention
    from transformers.models.pixtral.modeling_pixtral import generate_block_attention_mask

    from chandra_ocr.ocr.vllm_pixtral import per_image_attention

    out = {}
    for images in (1, 2, 3):
        counts = [patches] * images
        n = sum(counts)
        q, k, v = (torch.randn(1, HEADS, n, HEAD_DIM, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        embeds = torch.empty(1, n, 1, device="cuda", dtype=torch.bfloat16)

        def dense(q=q, k=k, v=v, counts=counts, embeds=embeds):
            mask = generate_block_attention_mask(counts, embeds)  # what vLLM 0.25 builds once per step
            for _ in range(LAYERS):
                scaled_dot_product_attention(q, k, v, attn_mask=mask)

        def per_image(q=q, k=k, v=v, counts=counts):
            for _ in range(LAYERS):
                per_image_attention(q, k, v, counts)

        dense_s, ours_s = timed(dense), timed(per_image)
        out[str(images)] = {
            "patches_per_image": patches,
            "dense_mask_s_per_image": round(dense_s / images, 4),
            "per_image_flash_s_per_image": round(ours_s / images, 4),
            "speedup": round(dense_s / ours_s, 2),
            "kernels_dense": kernels(dense),
            "kernels_per_image": kernels(per_image),
        }
        print(
            json.dumps({images: {k: v for k, v in out[str(images)].items() if "kernels" not in k}}),
            flush=True,
        )
    return out


def kernels(fn) -> list[str]:
    """The CUDA kernels taking most GPU time in one call of ``fn`` (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = sorted(prof.key_averages(), key=lambda e: -getattr(e, "device_time_total", 0))
    return [f"{e.key[:90]} {getattr(e, 'device_time_total', 0) / 1000:.1f} ms" for e in events[:4]]


def preprocessing(model: Path, source: Path, n: int) -> dict:
    """Seconds per page of the image processor on rendered pages (the front end's share)."""
    from transformers import AutoImageProcessor

    from bench.gpu import scheduling as gs
    from chandra_ocr.ocr.presets import LIGHTONOCR2
    from chandra_ocr.pdf.render import render_page

    processor = AutoImageProcessor.from_pretrained(model)
    pages = gs.collect_requests(source, n)
    images = [render_page(p.pdf_path, p.page_no, LIGHTONOCR2.render) for p in pages]
    processor(images=images[:2], return_tensors="pt")
    t0 = time.perf_counter()
    for image in images:
        processor(images=[image], return_tensors="pt")
    per_page = (time.perf_counter() - t0) / len(images)
    return {"processor": type(processor).__name__, "pages": len(images), "s_per_page": round(per_page, 4)}


def main() -> None:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--source", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--pages", type=int, default=32)
    args = p.parse_args()
    patches = (1190 // 14) * (1540 // 14)  # a US Letter page at LightOnOCR's 1540 px longest side
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    record["attention"] = attention_cases(patches)
    record["preprocessing"] = preprocessing(args.model, args.source, args.pages)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record["preprocessing"]))


if __name__ == "__main__":
    main()
