"""The project's cache folder: the user's XDG cache, else ~/.cache."""

from pathlib import Path

from components.core.cache import cache_dir


def test_the_cache_is_under_xdg_cache_home_else_under_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg/dogs-vs-cats"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == Path(tmp_path, ".cache/dogs-vs-cats")
