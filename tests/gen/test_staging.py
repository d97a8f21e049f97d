"""Tests of gen/staging.py: multi-file outputs written whole or not at all."""

import pytest

from fcircnn.gen.staging import OutputConflict, staged_folder, target_conflict


def _tree(folder):
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_a_new_folder_appears_whole(tmp_path):
    out = tmp_path / "new" / "out"
    with staged_folder(out) as tmp:
        assert not out.exists()  # nothing in place before the end
        (tmp / "a.txt").write_text("a")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.txt").write_text("b")
    assert _tree(out) == {"a.txt": "a", "sub/b.txt": "b"}
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]  # no temporary left


def test_an_existing_folder_keeps_its_other_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old")
    (out / "keep.txt").write_text("keep")
    with staged_folder(out) as tmp:
        (tmp / "a.txt").write_text("new")
    assert _tree(out) == {"a.txt": "new", "keep.txt": "keep"}


def test_an_error_leaves_the_output_as_it_was(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old")
    with pytest.raises(RuntimeError, match="half way"):
        with staged_folder(out) as tmp:
            (tmp / "a.txt").write_text("new")
            raise RuntimeError("half way")
    assert _tree(out) == {"a.txt": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(RuntimeError):
        with staged_folder(tmp_path / "never") as tmp:
            (tmp / "a.txt").write_text("new")
            raise RuntimeError
    assert not (tmp_path / "never").exists()


def test_a_folder_where_a_file_goes_moves_nothing(tmp_path):
    out = tmp_path / "out"
    (out / "b.txt").mkdir(parents=True)
    (out / "a.txt").write_text("old")
    why = target_conflict(out, ["a.txt", "b.txt"])
    assert why == f"{out / 'b.txt'} is a folder, where the file b.txt goes"
    (tmp_path / "f").write_text("x")
    why = target_conflict(tmp_path, ["f/c.txt"])
    assert why == f"{tmp_path / 'f'} is a file, where the folder f goes"
    with pytest.raises(OutputConflict, match=r"b\.txt is a folder"):
        with staged_folder(out) as tmp:
            (tmp / "a.txt").write_text("new")
            (tmp / "b.txt").write_text("new")
    assert (out / "a.txt").read_text() == "old"


def test_a_folder_made_meanwhile_by_another_writer_is_filled_file_by_file(tmp_path,
                                                                         monkeypatch):
    # two runs saving the same image at once: the other makes the folder between the check
    # and the rename
    import errno
    import os

    from fcircnn.gen import staging

    out = tmp_path / "image"

    def rename(src, dst):
        os.mkdir(dst)
        (out / "b.txt").write_text("theirs")
        raise OSError(errno.ENOTEMPTY, "Directory not empty")

    monkeypatch.setattr(staging.os, "rename", rename)
    with staged_folder(out) as tmp:
        (tmp / "a.txt").write_text("mine")
    assert _tree(out) == {"a.txt": "mine", "b.txt": "theirs"}
