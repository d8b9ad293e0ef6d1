"""A server's start deletes what older versions of the code kept on disk (web/model_state/
disk_cache.py DiskCache.prune_older_versions): each version's folder holds a GGUF model's float32
copy (~0.5 GB for SmolLM2) that no later version reads; this version's folder and the array
results (which name their own code) stay."""
import os

from web.model_state.disk_cache import DIR_NAME, DiskCache, code_version


def test_a_start_deletes_older_versions_and_keeps_its_own_and_the_arrays(tmp_path):
    top = tmp_path / DIR_NAME
    old = top / "0123456789abcdef" / "models" / "digest"
    old.mkdir(parents=True)
    (old / "0000.npy").write_bytes(b"\0" * 1024)
    kept_array = top / "arrays" / "quantized" / "key" / "code"
    kept_array.mkdir(parents=True)
    (kept_array / "kept.pickle").write_bytes(b"x")
    disk = DiskCache(str(tmp_path))
    assert disk.get("tests", ("a measurement",), lambda: 42) == 42     # this version's folder
    assert disk.prune_older_versions() == ["0123456789abcdef"]
    assert sorted(os.listdir(top)) == sorted(["arrays", code_version()])
    assert (kept_array / "kept.pickle").exists()

    def fail():
        raise AssertionError("computed again: this version's folder was deleted")
    again = DiskCache(str(tmp_path))
    assert again.get("tests", ("a measurement",), fail) == 42 and again.read == 1
    assert again.prune_older_versions() == []


def test_pruning_a_data_dir_without_a_cache_does_nothing(tmp_path):
    assert DiskCache(str(tmp_path / "nothing here")).prune_older_versions() == []
