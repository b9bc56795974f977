"""The chapters' capability gates: what a T4, an H200 and the interpreter are allowed to run."""
import pytest
import torch

from fa2 import notebook as nb
from fa2 import runtime


@pytest.fixture
def gpu(monkeypatch):
    """Pretend to be on a GPU of a given compute capability."""
    def on(cc, name="NVIDIA Test GPU"):
        monkeypatch.setattr(runtime, "DEVICE", "cuda")
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: cc)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)
    return on


def test_t4_runs_fp16_only_and_no_hopper_path(gpu, capsys):
    gpu((7, 5), "Tesla T4")
    assert not nb.has_bf16() and not nb.is_hopper()
    assert nb.dtypes() == (torch.float16,)
    assert "[skipped] bf16: Tesla T4 (sm_75) has no bf16" in capsys.readouterr().out


def test_a100_has_bf16_but_not_the_hopper_path(gpu):
    gpu((8, 0))
    assert nb.has_bf16() and not nb.is_hopper()
    assert nb.dtypes() == (torch.float16, torch.bfloat16)


def test_h200_has_both_unless_disabled(gpu, monkeypatch, capsys):
    gpu((9, 0), "NVIDIA H200")
    assert nb.has_bf16() and nb.is_hopper()
    monkeypatch.setenv("FA2_DISABLE", "bf16,hopper")           # rehearse a T4 run on the H200
    assert not nb.has_bf16() and not nb.is_hopper()
    assert nb.dtypes() == (torch.float16,)
    assert "FA2_DISABLE turns bf16 off" in capsys.readouterr().out


def test_interpreter_has_bf16_and_no_hopper_path(monkeypatch):
    monkeypatch.setattr(runtime, "DEVICE", "cpu")
    assert nb.has_bf16() and not nb.is_hopper() and nb.capability() == (0, 0)


def test_skip_prints_a_visible_note(capsys):
    nb.skip("needs an sm_90 GPU")
    assert capsys.readouterr().out == "[skipped] needs an sm_90 GPU\n"


def test_figure_style_sets_the_book_look():
    import matplotlib as mpl

    nb.figure_style()
    assert mpl.rcParams["figure.dpi"] == nb.FIGURE_DPI and mpl.rcParams["axes.grid"]
