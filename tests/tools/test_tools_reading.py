"""get_text_content in parts (offset and limit) and search_text, bounded in memory and output."""

import re
import tracemalloc
from pathlib import Path

import pytest

from roject.models import Role
from roject.storage import StorageError, read_lines
from roject.storage.pattern_size import expansion
from rojos.tools import RojoToolContext, registry
from tests.support.helpers import error_message


@pytest.fixture
def outside(tmp_path: Path, root: Path) -> Path:
    """A directory next to the root with a secret, linked from the root as `out`."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("needle from outside\n")
    (root / "out").symlink_to(outside, target_is_directory=True)
    return outside


@pytest.fixture
def ctx(root: Path) -> RojoToolContext:
    return RojoToolContext(project_id=1, project_root=root, role=Role.VIEWER)


def numbered(count: int) -> str:
    return "".join(f"line {n}\n" for n in range(1, count + 1))


async def read(ctx: RojoToolContext, path: str, **args):
    return await registry.execute("get_text_content", {"path": path, **args}, ctx)


# get_text_content


async def test_without_offset_or_limit_the_whole_text_is_a_string(root, ctx):
    """The plain call still answers the file's text itself."""
    (root / "notes.md").write_text(numbered(3))
    assert await read(ctx, "notes.md") == "line 1\nline 2\nline 3\n"


async def test_offset_and_limit_return_exactly_those_lines(root, ctx):
    """Lines 3 to 6 of ten, with cut set because more follow."""
    (root / "notes.md").write_text(numbered(10))
    assert await read(ctx, "notes.md", offset=3, limit=4) == {
        "text": "line 3\nline 4\nline 5\nline 6\n",
        "startLine": 3,
        "endLine": 6,
        "cut": True,
    }


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            {"offset": 8, "limit": 3},
            {"text": "line 8\nline 9\nline 10\n", "startLine": 8, "endLine": 10, "cut": False},
            id="limit-reaches-the-end",
        ),
        pytest.param(
            {"offset": 9, "limit": 50},
            {"text": "line 9\nline 10\n", "startLine": 9, "endLine": 10, "cut": False},
            id="limit-beyond-the-end",
        ),
        pytest.param(
            {"offset": 10},
            {"text": "line 10\n", "startLine": 10, "endLine": 10, "cut": False},
            id="offset-only",
        ),
        pytest.param(
            {"limit": 2},
            {"text": "line 1\nline 2\n", "startLine": 1, "endLine": 2, "cut": True},
            id="limit-only",
        ),
    ],
)
async def test_cut_says_whether_more_lines_follow(root, ctx, args, expected):
    """cut is false once the last line is in the answer, true while lines remain."""
    (root / "notes.md").write_text(numbered(10))
    assert await read(ctx, "notes.md", **args) == expected


async def test_last_line_without_newline_is_returned(root, ctx):
    """A final line without a newline counts as a line."""
    (root / "notes.md").write_text("one\ntwo")
    assert await read(ctx, "notes.md", offset=2) == {
        "text": "two",
        "startLine": 2,
        "endLine": 2,
        "cut": False,
    }


@pytest.mark.parametrize("offset", [11, 500])
async def test_offset_beyond_the_file_names_its_line_count(root, ctx, offset):
    """Asking past the end says how many lines there are."""
    (root / "notes.md").write_text(numbered(10))
    result = await read(ctx, "notes.md", offset=offset)
    assert error_message(result) == "'notes.md' has only 10 lines"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"offset": 0}, "offset is a line number and starts at 1"),
        ({"offset": -3, "limit": 2}, "offset is a line number and starts at 1"),
        ({"offset": 1, "limit": 0}, "limit must be at least 1"),
        ({"limit": -1}, "limit must be at least 1"),
        ({"offset": "2"}, "argument 'offset' must be of type integer"),
        ({"limit": 2.5}, "argument 'limit' must be of type integer"),
    ],
)
async def test_offset_and_limit_must_be_positive_integers(root, ctx, args, expected):
    """Zero, negative and non-integer offsets and limits are refused."""
    (root / "notes.md").write_text(numbered(3))
    assert error_message(await read(ctx, "notes.md", **args)) == expected


async def test_file_over_the_read_limit_is_refused_whole_but_readable_in_parts(root, ctx, settings):
    """The whole-file call points to offset and limit, which then work."""
    settings.ROJO_MAX_READ_BYTES = 100
    content = numbered(50)
    (root / "big.txt").write_text(content)
    assert error_message(await read(ctx, "big.txt")) == (
        f"'big.txt' is {len(content)} bytes, over the 100-byte read limit; "
        "read it in parts with offset and limit"
    )
    assert await read(ctx, "big.txt", offset=40, limit=2) == {
        "text": "line 40\nline 41\n",
        "startLine": 40,
        "endLine": 41,
        "cut": True,
    }


async def test_parts_never_exceed_the_read_budget_and_add_up_to_the_file(root, ctx, settings):
    """Each part stays within ROJO_MAX_READ_BYTES (cut set); following cut rebuilds the file."""
    settings.ROJO_MAX_READ_BYTES = 100
    content = numbered(50)
    (root / "big.txt").write_text(content)
    parts = []
    offset = 1
    for _ in range(20):
        part = await read(ctx, "big.txt", offset=offset, limit=1000)
        assert len(part["text"].encode()) <= 100
        assert part["startLine"] == offset
        parts.append(part)
        if not part["cut"]:
            break
        offset = part["endLine"] + 1
    assert "".join(p["text"] for p in parts) == content
    assert [p["cut"] for p in parts] == [True] * (len(parts) - 1) + [False]
    assert len(parts) > 1


async def test_line_longer_than_the_budget_is_named_and_can_be_skipped(root, ctx, settings):
    """A line that can never fit is an error pointing past it, not an empty part forever."""
    settings.ROJO_MAX_READ_BYTES = 100
    (root / "long.txt").write_text("short\n" + "x" * 500 + "\nafter\n")
    assert await read(ctx, "long.txt", offset=1) == {
        "text": "short\n",
        "startLine": 1,
        "endLine": 1,
        "cut": True,
    }
    assert error_message(await read(ctx, "long.txt", offset=2)) == (
        "line 2 of 'long.txt' is longer than the 100-byte read limit; continue with offset 3"
    )
    assert await read(ctx, "long.txt", offset=3) == {
        "text": "after\n",
        "startLine": 3,
        "endLine": 3,
        "cut": False,
    }


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(b"text\x00\x01\x02\n", "'data.bin' is a binary file, not text", id="binary"),
        pytest.param("café\n".encode("latin-1"), "'data.bin' is not UTF-8 text", id="latin-1"),
    ],
)
async def test_parts_of_non_text_files_are_refused(root, ctx, content, expected):
    """Reading in parts refuses binaries and non-UTF-8 text as the whole read does."""
    (root / "data.bin").write_bytes(content)
    assert error_message(await read(ctx, "data.bin", offset=1, limit=5)) == expected


@pytest.mark.parametrize("path", ["../outside/secret.txt", "out/secret.txt", "/etc/passwd"])
async def test_parts_outside_the_root_are_refused(root, ctx, outside, path):
    """offset and limit go through the same gate as a whole read."""
    message = error_message(await read(ctx, path, offset=1, limit=1))
    assert message.startswith(f"path {path!r} ")
    assert "needle" not in message


async def test_a_slice_of_a_large_file_is_read_in_bounded_memory(root, ctx, settings):
    """A 5 MB file with a 64 KiB limit gives exactly the lines asked for."""
    settings.ROJO_MAX_READ_BYTES = 64 * 1024
    line = "{:07d} " + "x" * 56 + "\n"
    (root / "big.log").write_text("".join(line.format(n) for n in range(1, 80_001)))
    assert (root / "big.log").stat().st_size > 5_000_000
    assert await read(ctx, "big.log", offset=79_998, limit=2) == {
        "text": line.format(79_998) + line.format(79_999),
        "startLine": 79_998,
        "endLine": 79_999,
        "cut": True,
    }


def peak_memory(call) -> int:
    """The peak of Python allocations while `call()` runs."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture
def one_huge_line(root: Path, settings) -> str:
    """A 5 MB line between two short ones, with a 64 KiB read limit."""
    settings.ROJO_MAX_READ_BYTES = 64 * 1024
    (root / "one_line.txt").write_bytes(b"start\n" + b"y" * 5_000_000 + b"\nend\n")
    return "one_line.txt"


def test_skipping_a_huge_line_costs_no_more_than_the_budget(root, one_huge_line):
    """Lines before offset are skipped without loading a huge one into memory."""
    parts = []
    peak = peak_memory(lambda: parts.append(read_lines(root, one_huge_line, offset=3, limit=1)))
    assert parts == [{"text": "end\n", "startLine": 3, "endLine": 3, "cut": False}]
    assert peak < 1_000_000


def test_refusing_a_huge_line_costs_no_more_than_the_budget(root, one_huge_line):
    """A line that cannot be returned is refused without being loaded whole."""

    def refused():
        with pytest.raises(StorageError, match=re.escape("line 2 of 'one_line.txt' is longer")):
            read_lines(root, one_huge_line, offset=2, limit=1)

    assert peak_memory(refused) < 1_000_000


# search_text


async def search(ctx: RojoToolContext, query: str, **args):
    return await registry.execute("search_text", {"query": query, **args}, ctx)


def make_tree(root: Path) -> None:
    (root / "src" / "deep").mkdir(parents=True)
    (root / "a.txt").write_text("needle one\nnothing here\nanother needle\n")
    (root / "src" / "c.md").write_text("no match\n")
    (root / "src" / "deep" / "b.py").write_text("x = 1\ny = 'needle'\n")


async def test_search_finds_a_string_across_nested_files(root, ctx):
    """Matches carry the relative path, the 1-based line number and the line text."""
    make_tree(root)
    assert await search(ctx, "needle") == {
        "matches": [
            {"path": "a.txt", "line": 1, "text": "needle one"},
            {"path": "a.txt", "line": 3, "text": "another needle"},
            {"path": "src/deep/b.py", "line": 2, "text": "y = 'needle'"},
        ],
        "cut": False,
    }


async def test_plain_search_takes_the_query_literally(root, ctx):
    """Without regex, metacharacters are plain text."""
    (root / "a.txt").write_text("axb\na.b\n(a)\n")
    result = await search(ctx, "a.b")
    assert result == {"matches": [{"path": "a.txt", "line": 2, "text": "a.b"}], "cut": False}
    result = await search(ctx, "(a)")
    assert result == {"matches": [{"path": "a.txt", "line": 3, "text": "(a)"}], "cut": False}


async def test_regex_search(root, ctx):
    """With regex: true the query is a regular expression."""
    (root / "code.py").write_text("def alpha(x):\n    return x\ndef beta():\n")
    result = await search(ctx, r"^def \w+\(\)", regex=True)
    assert result == {
        "matches": [{"path": "code.py", "line": 3, "text": "def beta():"}],
        "cut": False,
    }


async def test_invalid_regex_is_a_clear_error(ctx):
    """A pattern that does not compile is reported, not raised."""
    message = error_message(await search(ctx, "(unclosed", regex=True))
    assert message.startswith("query is not a valid regular expression: ")
    assert "missing )" in message


async def test_empty_query_is_refused(ctx):
    """An empty query would match every line."""
    assert error_message(await search(ctx, "")) == "query must not be empty"


async def test_path_restricts_the_search_to_a_directory(root, ctx):
    """Only files under path are searched; paths stay relative to the root."""
    make_tree(root)
    (root / "src" / "c.md").write_text("needle in src\n")
    assert await search(ctx, "needle", path="src") == {
        "matches": [
            {"path": "src/c.md", "line": 1, "text": "needle in src"},
            {"path": "src/deep/b.py", "line": 2, "text": "y = 'needle'"},
        ],
        "cut": False,
    }


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("a.txt", "'a.txt' is not a directory"),
        ("missing", "'missing' is not a directory"),
    ],
)
async def test_search_path_must_be_a_directory(root, ctx, path, expected):
    """A file or a missing directory as path is an error."""
    make_tree(root)
    assert error_message(await search(ctx, "needle", path=path)) == expected


@pytest.mark.parametrize(
    ("files", "count", "cut"),
    [
        pytest.param({"a.txt": 150}, 100, True, id="one-file-over"),
        pytest.param({"a.txt": 60, "b.txt": 60}, 100, True, id="across-files"),
        pytest.param({"a.txt": 100}, 100, False, id="exactly-100"),
    ],
)
async def test_search_results_are_capped_at_100(root, ctx, files, count, cut):
    """At most 100 matches; cut is true only when there were more."""
    for name, lines in files.items():
        (root / name).write_text("match\n" * lines)
    result = await search(ctx, "match")
    assert len(result["matches"]) == count
    assert result["cut"] is cut
    assert result["matches"][0] == {"path": "a.txt", "line": 1, "text": "match"}


async def test_binary_and_oversized_files_are_skipped(root, ctx, settings):
    """Files that get_text_content would refuse are left out of the search."""
    settings.ROJO_MAX_READ_BYTES = 1000
    (root / "blob.bin").write_bytes(b"needle\x00\x01")
    (root / "huge.txt").write_text("needle\n" * 200)
    (root / "small.txt").write_text("needle\n")
    assert await search(ctx, "needle") == {
        "matches": [{"path": "small.txt", "line": 1, "text": "needle"}],
        "cut": False,
    }


async def test_symlinks_are_not_followed(root, ctx, outside):
    """Links to files or directories, outside or inside the root, are not searched."""
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "inside.txt").write_text("needle inside\n")
    (root / "alias.txt").symlink_to("inside.txt")
    result = await search(ctx, "needle")
    assert result == {
        "matches": [{"path": "inside.txt", "line": 1, "text": "needle inside"}],
        "cut": False,
    }
    assert "outside" not in str(result)


@pytest.mark.parametrize("path", ["..", "../outside", "out", "/etc", "{outside}"])
async def test_search_outside_the_root_is_refused(root, ctx, outside, path):
    """The search path goes through the gate; nothing from outside is returned."""
    path = path.format(outside=outside)
    message = error_message(await search(ctx, "needle", path=path))
    assert message.startswith(f"path {path!r} ")
    assert "needle from outside" not in message


async def test_no_matches(root, ctx):
    """Nothing found is an empty list, not an error."""
    make_tree(root)
    assert await search(ctx, "haystack") == {"matches": [], "cut": False}


async def test_long_lines_are_truncated_in_results(root, ctx):
    """A matching line comes back cut to 500 characters."""
    line = "needle " + "é" * 1000
    (root / "long.txt").write_text(line + "\n")
    result = await search(ctx, "needle")
    assert result == {
        "matches": [{"path": "long.txt", "line": 1, "text": line[:500]}],
        "cut": False,
    }


async def test_list_files_pages_a_large_directory(root, ctx):
    """Past 500 entries the listing comes in pages the model walks with offset."""
    for number in range(1203):
        (root / f"f{number:05d}.txt").write_text("")
    first = await registry.execute("list_files", {"path": ""}, ctx)
    assert (first["offset"], first["total"], first["cut"]) == (0, 1203, True)
    assert [e["name"] for e in first["entries"]][:2] == ["f00000.txt", "f00001.txt"]
    assert len(first["entries"]) == 500

    last = await registry.execute("list_files", {"path": "", "offset": 1000}, ctx)
    assert (len(last["entries"]), last["cut"]) == (203, False)
    assert last["entries"][-1] == {"name": "f01202.txt", "type": "file"}

    small = await registry.execute("list_files", {"path": "", "offset": 10, "limit": 3}, ctx)
    assert [e["name"] for e in small["entries"]] == ["f00010.txt", "f00011.txt", "f00012.txt"]
    refused = await registry.execute("list_files", {"path": "", "offset": -1}, ctx)
    assert refused == {"error": "offset must be 0 or more"}


async def test_list_files_of_a_small_directory_stays_a_plain_list(root, ctx):
    (root / "a.txt").write_text("")
    assert await registry.execute("list_files", {"path": ""}, ctx) == [
        {"name": "a.txt", "type": "file"}
    ]


async def test_a_catastrophic_regex_gives_up_with_a_clear_error(root, ctx, settings):
    """A pattern that backtracks for ever is stopped at the deadline, not left hogging a thread."""
    settings.ROJO_SEARCH_SECONDS = 0.3
    (root / "a.txt").write_text("a" * 60 + "b\n")

    result = await registry.execute("search_text", {"query": "(a|aa)+$", "regex": True}, ctx)

    assert result == {
        "error": "the search took longer than 0.3 s; use a simpler pattern or search a "
        "smaller directory"
    }


async def test_a_regex_that_would_take_gigabytes_to_compile_is_refused(root, ctx):
    """The engine writes counted repeats out in full: this one would take 2.4 GB."""
    (root / "a.txt").write_text("2026-11 x\n")

    refused = await registry.execute(
        "search_text", {"query": "(?:x{3000}){3000}", "regex": True}, ctx
    )

    assert refused == {
        "error": "query repeats too much: its counted repeats come to 9,006,000 characters "
        "written out, over 100,000; use smaller counts, or + and *"
    }
    found = await registry.execute("search_text", {"query": r"\d{4}-\d{2}", "regex": True}, ctx)
    assert found["matches"] == [{"path": "a.txt", "line": 1, "text": "2026-11 x"}]


@pytest.mark.parametrize(
    ("pattern", "size"),
    [
        ("abc", 3),
        (r"\d{4}-\d{2}", 7),
        ("(?:ab{50}c){50}", 2700),
        ("(?:(?:x{100}){100}){100}", 1_020_200),
        (r"\{3000}", 6),  # an escaped brace is a literal
        ("[{]{2}", 2),  # so is one in a class
        ("[]{]x{5}", 6),
        ("a{5,}", 5),
        ("x{,5}", 5),
        ("x{name}", 7),
    ],
)
def test_pattern_expansion_counts_atoms_times_their_repeats(pattern, size):
    assert expansion(pattern) == size
