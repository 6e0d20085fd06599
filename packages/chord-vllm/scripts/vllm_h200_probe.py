"""Try vLLM 0.33's Python classes on a GPU host where vLLM cannot be installed (no network, its own
torch), and run chord-vllm's vLLM tests there with Chord's real kernels.

  stage  (on a machine with PyPI): vLLM 0.33's ``.py`` files, without its compiled extensions,
         zipped, plus the pure-Python and small binary wheels vLLM imports that the GPU image
         lacks, all for Python 3.12, under ``packages/chord-vllm/.probe/`` (git-ignored; about
         30 MiB, refused above 40 MiB).
  run    (on the GPU host, from the repo root): unpack them into a temporary folder, import vLLM's
         fused-MoE layer, and if that works run ``tests/test_vllm_gpu.py`` and ``tests/test_core.py``
         (the core's GPU tests). Writes ``probe.json`` (and the pytest log) under ``$OUT`` or ``./probe-out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
ROOT = PACKAGE.parent.parent
STAGE = PACKAGE / ".probe"
LIMIT_MIB = 40
VENDORED = ("vllm/third_party/__init__.py", "vllm/third_party/pynvml.py")
STUBS = ("vllm/_C_stable_libtorch.py",)
VLLM = "vllm==0.33.0"
# What vLLM 0.33 imports that the GPU image (torch 2.11, transformers 5.17, huggingface_hub,
# safetensors, aiohttp, psutil, regex, pillow, uvloop, prometheus-client, triton) does not have.
WHEELS = (
    "pydantic>=2.12", "pydantic-core", "annotated-types", "typing-inspection", "pyzmq", "cbor2",
    "oss-harmony", "openai", "httpx2", "httpcore2", "truststore", "jiter", "sniffio", "distro", "pybase64", "cachetools", "msgspec",
    "xgrammar==0.2.8", "apache-tvm-ffi", "fastapi>=0.133,<0.137", "starlette", "partial-json-parser",
    "compressed-tensors==0.17.0", "loguru", "blake3", "ijson", "setproctitle", "depyf", "lark",
    "einops", "py-cpuinfo", "cloudpickle", "nvidia-ml-py", "hypothesis", "sortedcontainers",
    "requests", "urllib3", "certifi", "charset-normalizer", "anyio", "h11", "annotated-doc",
    # vLLM pins llguidance>=1.7,<1.8; its dataclass annotations need only the module at import time.
    "llguidance",
)
TARGET = ("--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--platform",
          "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
          "--only-binary=:all:")


def _mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / (1 << 20)


def stage() -> None:
    wheels = STAGE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", tmp, VLLM],
                       check=True)
        (wheel,) = Path(tmp).glob("vllm-*.whl")
        with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(STAGE / "vllm-py.zip", "w", zipfile.ZIP_DEFLATED,
                                                             compresslevel=9) as dst:
            for info in src.infolist():
                # Of vLLM's vendored third_party code only its pynvml copy, which platform detection imports.
                third_party = "/third_party/" in info.filename
                if info.filename.endswith(".py") and (not third_party or info.filename in VENDORED):
                    dst.writestr(info.filename, src.read(info))
    for req in WHEELS:  # one at a time: a wheel missing for this target is reported, not fatal
        out = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest",
                              str(wheels), *TARGET, req], capture_output=True, text=True, check=False)
        if out.returncode:
            print(f"no Python 3.12 wheel for {req}: {out.stderr.strip().splitlines()[-1:]}")
    size = _mib(STAGE)
    print(f"staged {STAGE.relative_to(ROOT)}: {size:.1f} MiB "
          f"({len(list(wheels.glob('*.whl')))} wheels + vllm-py.zip)")
    if size > LIMIT_MIB:
        sys.exit(f"{size:.1f} MiB is over the {LIMIT_MIB} MiB this probe may carry; drop wheels from WHEELS")


def _probe_import(site: Path, env: dict[str, str]) -> dict:
    code = ("import time, torch; t = time.time(); import vllm; "
            "import vllm.model_executor.layers.fused_moe, vllm.model_executor.layers.quantization."
            "compressed_tensors.compressed_tensors; "
            "from vllm.platforms import current_platform; "
            "print(vllm.__version__, torch.__version__, current_platform.device_name, "
            "current_platform.get_device_capability(), round(time.time() - t, 1))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    return {"ok": out.returncode == 0, "stdout": out.stdout.strip()[-2000:], "stderr": out.stderr.strip()[-6000:]}


def run(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        try:
            with zipfile.ZipFile(STAGE / "vllm-py.zip") as z:
                z.extractall(site)
            for wheel in sorted((STAGE / "wheels").glob("*.whl")):
                with zipfile.ZipFile(wheel) as z:
                    z.extractall(site)
            # Compiled extensions imported only for their op registrations become empty modules:
            # an op Chord's path does call would fail loudly (torch.ops lookup), never silently.
            for stub in STUBS:
                (site / stub).write_text('"""Empty stand-in written by vllm_h200_probe.py (no compiled vLLM here)."""\n')
            # vLLM picks its platform from its own distribution's version. Its CUDA platform calls
            # compiled ops while importing (probed on the H200: cutlass_scaled_mm_supports_block_fp8),
            # so the Python-only vLLM runs as a CPU build ("+cpu") while the tensors and Chord's
            # kernels are on the GPU; without metadata no platform is found at all.
            version = VLLM.split("==")[1]
            dist = site / f"vllm-{version}+cpu.dist-info"
            dist.mkdir()
            (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
        except Exception:
            result["stage"] = traceback.format_exc()
            _finish(out_dir, result)
            return
        sources = [str(ROOT / "packages" / p / "src") for p in ("chord-kernels", "chord-pack", "chord-vllm")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sources, str(site), os.environ.get("PYTHONPATH", "")]),
               "VLLM_TARGET_DEVICE": "cuda"}
        result["import"] = _probe_import(site, env)
        if result["import"]["ok"]:
            log = out_dir / "pytest-vllm-gpu.log"
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                   "tests/test_vllm_gpu.py", "tests/test_core.py"]
            start = time.time()
            proc = subprocess.run(cmd, cwd=PACKAGE, capture_output=True, text=True, env=env, check=False)
            log.write_text(proc.stdout + proc.stderr)
            result["tests"] = {"exit": proc.returncode, "seconds": round(time.time() - start, 1),
                               "summary": (proc.stdout.strip().splitlines() or [""])[-1], "log": log.name}
    _finish(out_dir, result)


def _finish(out_dir: Path, result: dict) -> None:
    (out_dir / "probe.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("stage", "run"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "probe-out")))
    args = parser.parse_args()
    stage() if args.step == "stage" else run(args.out)


if __name__ == "__main__":
    main()
