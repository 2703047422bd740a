"""03_kernels_mlp.py's loaders, without a GPU: no Hub access and no liger-kernel both end in one clear line.

The lesson itself needs CUDA (tests/gpu); these check the two ways it can fail before that point.
"""

from __future__ import annotations


from conftest import run_script


def snippet_run(code: str, *args: str, tmp_path, **env):
    """``code`` run as a script from the repository root, as a lesson runs (tests/zygote.py's warm start:
    torch is imported already; what the loader imports, it imports itself)."""
    path = tmp_path / "snippet.py"
    path.write_text(code)
    return run_script(str(path), *args, env=env, timeout=120)

SNIPPET = """
import importlib.util, sys
from common.errors import BadInput
spec = importlib.util.spec_from_file_location("kernels_lesson", "03_kernels_mlp.py")
lesson = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lesson)
try:
    cls = lesson.load_liger_geglu_mlp(sys.argv[1])
except BadInput as exc:
    print(exc)
    sys.exit(2)
print("loaded", cls.__name__)
"""


def load(source: str, tmp_path, **env):
    return snippet_run(SNIPPET, source, tmp_path=tmp_path, **env)


def test_hub_unreachable_suggests_pip_source(tmp_path):
    # HF_HUB_OFFLINE: the Hub is unreachable and nothing is cached (an empty HF_HOME)
    proc = load("hub", tmp_path, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "kernels-community/liger-kernels" in proc.stdout and "use --source pip" in proc.stdout


def test_pip_source_without_liger_says_how_to_install(tmp_path):
    proc = load("pip", tmp_path)
    try:
        import liger_kernel  # noqa: F401
    except ImportError:
        assert proc.returncode == 2
        assert "uv run --extra liger" in proc.stdout
    else:
        assert proc.returncode == 0 and "loaded LigerGEGLUMLP" in proc.stdout


ATTENTION_SNIPPET = """
import importlib.util, sys
from common.errors import BadInput
spec = importlib.util.spec_from_file_location("kernels_attention", "04_d_kernels_attention.py")
lesson = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lesson)
try:
    flash = lesson.load_flash_attn()
except BadInput as exc:
    print(exc)
    sys.exit(2)
print("loaded", flash.flash_attn_func.__name__)
"""


def test_attention_hub_unreachable_says_what_to_run_instead(tmp_path):
    """04_d_kernels_attention.py's loader, the Hub unreachable and nothing cached: one line naming the
    pinned kernel and PyTorch's own flash attention to profile instead."""
    proc = snippet_run(ATTENTION_SNIPPET, tmp_path=tmp_path, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "kernels-community/flash-attn2 (version 3)" in proc.stdout
    assert "04_c_sdpa_attention.py --backend flash" in proc.stdout
    assert "Traceback" not in proc.stderr
