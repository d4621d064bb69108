from __future__ import annotations

from pathlib import Path

import pytest

from sparkwire.spark.runtime.session import QUICK_JIT, class_archive_options, driver_java_options


def test_a_given_archive_that_exists_is_used(tmp_path: Path) -> None:
    archive = tmp_path / "driver.jsa"
    archive.write_bytes(b"x")
    assert class_archive_options(str(archive)) == f"-XX:SharedArchiveFile={archive}"


def test_no_archive_means_no_option_so_the_jvm_starts_as_before(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKWIRE_CACHE", str(tmp_path))
    assert class_archive_options("") == ""
    (tmp_path / "spark-cds").mkdir()
    (tmp_path / "spark-cds" / "driver.jsa").write_bytes(b"x")
    assert class_archive_options("") == f"-XX:SharedArchiveFile={tmp_path / 'spark-cds' / 'driver.jsa'}"


def test_an_archive_named_but_missing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"--class-archive .*missing\.jsa.*no such file.*--class-archive off"):
        class_archive_options(str(tmp_path / "missing.jsa"))


def test_driver_options_are_the_archive_then_the_given_ones(tmp_path: Path) -> None:
    archive = tmp_path / "driver.jsa"
    archive.write_bytes(b"x")
    assert driver_java_options(str(archive), QUICK_JIT) == f"-XX:SharedArchiveFile={archive} -XX:TieredStopAtLevel=1"
    assert driver_java_options("off", QUICK_JIT) == "-XX:TieredStopAtLevel=1"
    assert driver_java_options(str(archive), " ") == f"-XX:SharedArchiveFile={archive}"
    assert driver_java_options("off", "") == ""
