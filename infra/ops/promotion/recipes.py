"""How each artefact variant is built and checked (facts as data): the hardware it is for, the conversion
command, and what the manifest records about it.

The quantised CUDA variants (cuda-fp8, cuda-int8, cuda-int4) are built by llm-compressor, the library vLLM's
users convert with: compress.py (written into the pod as engine_check.py is) runs its `oneshot` in the converter
image (mlinfra:serving.converterImage, built from images/converter/Dockerfile: the vLLM image plus llm-compressor in
an environment of its own), on the pool's GPUs: FP8_DYNAMIC for cuda-fp8, SmoothQuant then GPTQ W8A8 for cuda-int8,
AWQ W4A16 for cuda-int4 (the last two on the promotion's calibration data). It writes the compressed-tensors format
vLLM loads natively (tests/contracts/data/compressed_tensors.json). mlinfra's own quantiser (quantize.py, awq.py)
builds no artefact: it stays as what llm-compressor cannot be, the gate's test fixture that quantises in-process
with deliberately wrong scales, and the baseline of the comparison in benchmarks/RESULTS.md. Each is built on the
first AWS pool whose devices can serve it (variants.pools_for): a stack without that pool cannot build it here.

neuron-int8 is built on inf2 by NxD Inference itself, which vLLM-Neuron does not do: neuron_quantize.py (shipped
the same way) calls its save_quantized_state_dict on the CPU (int8 per output channel, symmetric; lm_head kept in
bf16) into the artefact's neuron-quantized/, then vLLM-Neuron compiles as for `neuron`; every engine names that
directory as its step sees the artefact (quantized_checkpoints_path, infra/serving/engine.py). The format is
recorded in tests/contracts/data/nxd_inference.json.

Every other variant is built in the image of the model server that will serve it, and every variant is checked
there: after the conversion, a load-and-generate check (engine_check.py) runs on the variant's accelerator with the
engine settings the server is started with (infra/serving/engine.py). A variant with no model server in mlinfra has
no recipe: the TensorRT-LLM engine variant was removed for that reason.

The commands read the checkpoint from /work/checkpoint and write the artefact to /work/out; the check reads
the artefact read-only at /served, as a server mounts it. They have not been run from this repository (no
accelerators here): see docs/serving.md, "What only a real cluster confirms".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from infra.serving import engine
from infra.serving.families import FAMILIES
from infra.serving.variants import facts as variant_facts
from infra.serving.variants import pools_for

# A checkpoint's weights: what the Neuron artefact does not copy (NxD Inference writes its own sharded weights).
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth")
CHECK_PROGRAM = "/work/engine_check.py"
CALIBRATION_DIR = "/work/calibration"  # where the Job fetches a calibrated variant's datasets/calibration/<name>/
CONVERTER_PYTHON = "/opt/converter/bin/python3"  # llm-compressor's environment in the converter image


@dataclass(frozen=True)
class Recipe:
    variant: str
    accelerator: str  # serving node pool it is built on (and served on)
    default_image: str  # the server image, when no model entry of the serving stack follows the alias
    format: str
    precision: str
    convert: str  # shell: /work/checkpoint -> /work/out ($ENGINE holds the engine keywords as JSON)
    convert_on_accelerator: bool  # whether `convert` needs the devices (Neuron compiles on them)
    check_env: tuple[tuple[str, str], ...]  # environment of the load-and-generate check
    compiler_version: str  # shell printing the compiler's version
    runtime_version: str  # shell printing the serving runtime's version
    # Sizing of the `convert` step from the checkpoint's size S in GiB (sizing.py): estimates, not measurements.
    cpu: int  # cores requested (the compilers use more when the node has them: no CPU limit)
    memory_factor: float  # memory = memory_factor * S + memory_base_gib
    memory_base_gib: float
    disk_factor: float  # work volume = disk_factor * S + disk_base_gib (checkpoint, intermediates, artefact)
    disk_base_gib: float
    programs: tuple[str, ...] = ()  # files of this package `convert` writes to /work/ before it runs
    converter: bool = False  # `convert` runs in the converter image (mlinfra:serving.converterImage), not the server's


_PY = "python3 -c"
_NOT_WEIGHTS = " ".join(f"! -name '{pattern}'" for pattern in WEIGHT_FILES)
_COMPILED = f"/work/out/{engine.NEURON_COMPILED_DIR}"
_COPY_CONFIG = f"find /work/checkpoint -maxdepth 1 -type f {_NOT_WEIGHTS} -exec cp {{}} /work/out/ \\;"
_COMPILE = (
    f'NEURON_COMPILED_ARTIFACTS={_COMPILED} python3 {CHECK_PROGRAM} /work/checkpoint "$ENGINE" /work/compile.json'
)
_NEURON = Recipe(
    "neuron",
    "inf2",
    "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04",
    format=f"NxD Inference compiled model ({engine.NEURON_COMPILED_DIR}/, sharded weights) + Hugging Face config",
    precision="bf16",
    # The tokenizer and config as the server's --model; vLLM-Neuron compiles the checkpoint for the
    # server's exact engine shape into NEURON_COMPILED_ARTIFACTS (it compiles when nothing is there).
    convert=f"{_COPY_CONFIG}\n{_COMPILE}",
    convert_on_accelerator=True,
    check_env=(("NEURON_COMPILED_ARTIFACTS", f"/served/{engine.NEURON_COMPILED_DIR}"),),
    compiler_version=f"{_PY} 'import neuronxcc; print(neuronxcc.__version__)'",
    runtime_version=f"{_PY} 'import vllm; print(vllm.__version__)'",
    # The compile traces the model on the host (weights plus graphs) and neuronx-cc is memory-hungry;
    # the work volume holds the checkpoint, the compiled graphs and the sharded weights.
    cpu=4,
    memory_factor=2.0,
    memory_base_gib=8,
    disk_factor=2.5,
    disk_base_gib=10,
)

# int8 weight-only: NxD Inference's own quantiser (neuron_quantize.py calls its save_quantized_state_dict on the
# CPU) writes the quantized checkpoint into the artefact, then vLLM-Neuron compiles it as for `neuron`. $ENGINE is
# the server's engine with the checkpoint's path as this step sees it (/work/out/neuron-quantized; the check's
# names /served/..., the server's /models/...: engine.neuron_overrides).
_NEURON_INT8 = replace(
    _NEURON,
    variant="neuron-int8",
    format=f"NxD Inference compiled model ({engine.NEURON_COMPILED_DIR}/) + its int8 quantized checkpoint "
    f"({engine.NEURON_QUANTIZED_DIR}/: int8 weight, fp32 scale per output channel; safetensors) + Hugging Face "
    "config",
    precision="w8a16",
    convert=f'{_COPY_CONFIG}\npython3 /work/neuron_quantize.py /work/checkpoint "$ENGINE"\n{_COMPILE}',
    # Memory: NxD Inference quantises the whole model loaded in fp32 (transformers' default dtype: twice the bf16
    # checkpoint), plus the int8 copies it writes (about half); the compile after it, in its own process, needs
    # what the bf16 compile does (2 S + 8). Disk: the checkpoint, the quantized checkpoint (about half of it,
    # embeddings in fp32), the compiled graphs and the int8 sharded weights. Estimates.
    memory_factor=2.5,
    programs=("neuron_quantize.py",),
)
RECIPES = {
    "neuron": _NEURON,
    "neuron-int8": _NEURON_INT8,
    "cuda": Recipe(
        "cuda",
        "g5",
        "docker.io/vllm/vllm-openai:v0.33.0",
        format="safetensors (Hugging Face layout)",
        precision="bf16",
        # A re-save in bf16 on the CPU: no GPU is needed to write safetensors.
        convert=f"CUDA_VISIBLE_DEVICES= {_PY} 'import torch, transformers as t; "
        'm = t.AutoModelForCausalLM.from_pretrained("/work/checkpoint", dtype=torch.bfloat16); '
        'm.save_pretrained("/work/out", safe_serialization=True); '
        't.AutoTokenizer.from_pretrained("/work/checkpoint").save_pretrained("/work/out")\'',
        convert_on_accelerator=False,
        check_env=(),
        compiler_version=f"{_PY} 'import torch; print(\"cuda \" + str(torch.version.cuda))'",
        runtime_version=f"{_PY} 'import vllm; print(vllm.__version__)'",
        # The weights are loaded once in bf16 and written back as safetensors.
        cpu=2,
        memory_factor=1.25,
        memory_base_gib=4,
        disk_factor=2.0,
        disk_base_gib=10,
    ),
}


def _first_aws_pool(variant: str) -> str:
    return next(pool for pool in pools_for(variant) if FAMILIES[pool].cloud == "aws")


def _quantised(variant: str, scheme: str, layout: str, writes: str) -> Recipe:
    """A compressed-tensors variant (its CompressionFormat `layout`), built by llm-compressor: compress.py
    `--scheme <scheme>` run by the converter image's python (images/converter/; this module does not import
    compress.py: that would load torch wherever mlinfra runs)."""
    data = f" --calibration {CALIBRATION_DIR}" if variant_facts(variant).calibrated else ""
    return Recipe(
        variant,
        _first_aws_pool(variant),
        RECIPES["cuda"].default_image,
        format=f"compressed-tensors {layout} safetensors (Hugging Face layout; {writes}; llm-compressor 0.14.0.1)",
        precision=scheme,
        convert=f"{CONVERTER_PYTHON} /work/compress.py --scheme {scheme} --checkpoint /work/checkpoint{data} "
        "--out /work/out",
        # GPTQ's and AWQ's calibration passes run on the pool's GPUs (layer by layer: llm-compressor's sequential
        # pipeline onloads one decoder layer at a time), FP8_DYNAMIC's rounding too when they are there.
        convert_on_accelerator=True,
        check_env=(),
        compiler_version=RECIPES["cuda"].compiler_version,
        runtime_version=RECIPES["cuda"].runtime_version,
        # The whole model in host memory once (transformers loads it there in bf16: S; the quantisation replaces
        # each layer's weights in place), beside it the calibration samples' activations of the layer being
        # calibrated and the CUDA context. The work volume holds the checkpoint and the artefact. Estimates, not
        # measurements.
        cpu=2,
        memory_factor=1.0,
        memory_base_gib=10,
        disk_factor=1.6,
        disk_base_gib=10,
        # compress.py reads the checkpoint as quantize.py's conversion checks it and calibration.jsonl with
        # evaluate.py's reader: both beside it.
        programs=("compress.py", "quantize.py", "evaluate.py"),
        converter=True,
    )


RECIPES |= {
    "cuda-fp8": _quantised(
        "cuda-fp8",
        "fp8",
        "float-quantized",
        "FP8_DYNAMIC: per-channel float8 e4m3 weights, dynamic per-token fp8 activations",
    ),
    "cuda-int8": _quantised(
        "cuda-int8",
        "int8",
        "int-quantized",
        "SmoothQuant (strength 0.8) then GPTQ W8A8: per-channel int8 weights, dynamic per-token int8 activations",
    ),
    "cuda-int4": _quantised(
        "cuda-int4",
        "int4",
        "pack-quantized",
        "AWQ W4A16: activation-aware scales, symmetric int4 weights in groups of 128, packed eight to an int32",
    ),
}
VARIANTS = tuple(RECIPES)


def step_image(variant: str, server_image: str, converter_image: str | None, step: str = "built") -> str:
    """The image of a variant's convert and evaluate steps: the converter image for what llm-compressor builds (and
    lm-eval gates), the server's for the rest; ValueError when a converter variant is given none."""
    if not RECIPES[variant].converter:
        return server_image
    if converter_image is None:
        raise ValueError(f"{variant}: {step} in the converter image, and none was given")
    return converter_image
