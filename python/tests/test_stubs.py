"""The type stubs (.pyi, py.typed) say what the modules have: every public name of a module is in
its stub, and every class member a stub declares exists at run time. The ctypes declarations say
what the C headers say (the tests at the end)."""

import ast
import ctypes
import importlib
import pathlib
import re

import pytest

import crmm

PACKAGE = pathlib.Path(crmm.__file__).parent
MODULES = [
    "crmm",
    "crmm.mr",
    "crmm.rmm",
    "crmm.statistics",
    "crmm.pylibrmm",
    "crmm.pylibrmm.stream",
    "crmm.pylibrmm.cuda_stream_pool",
    "crmm.pylibrmm.device_buffer",
    "crmm.pylibrmm.logger",
    "crmm.pylibrmm.memory_resource",
    "crmm.pylibrmm.memory_resource.experimental",
    "crmm.mr.experimental",
]


def stub_of(name):
    module = importlib.import_module(name)
    path = pathlib.Path(module.__file__).with_suffix(".pyi")
    return module, ast.parse(path.read_text(), filename=str(path))


def top_level_names(tree):
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    star = importlib.import_module(("crmm." if node.level else "") + node.module.lstrip("."))
                    names.update(star.__all__)
                else:
                    names.add(alias.asname or alias.name)
    return names


def test_the_package_says_it_is_typed():
    assert (PACKAGE / "py.typed").is_file()


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_is_in_the_stub(name):
    module, tree = stub_of(name)
    missing = set(getattr(module, "__all__", [])) - top_level_names(tree)
    assert not missing, f"{name}.pyi lacks {sorted(missing)}"


@pytest.mark.parametrize("name", MODULES)
def test_every_member_a_stub_declares_exists(name):
    module, tree = stub_of(name)
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(module, node.name)
        for member in node.body:
            if isinstance(member, (ast.FunctionDef, ast.ClassDef)):
                assert hasattr(cls, member.name), f"{name}.{node.name}.{member.name}"
            elif isinstance(member, ast.AnnAssign) and not hasattr(cls, "__dataclass_fields__"):
                assert hasattr(cls, member.target.id) or member.target.id in getattr(cls, "__annotations__", {}), (
                    f"{name}.{node.name}.{member.target.id}"
                )


@pytest.mark.parametrize("name", MODULES)
def test_every_function_a_stub_declares_exists(name):
    module, tree = stub_of(name)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert callable(getattr(module, node.name, None)), f"{name}.{node.name}"


# ---- the ctypes declarations against the C headers ---------------------------------------------
# The package re-declares part of the C ABI for ctypes: function prototypes, struct layouts, the
# plugins' control ops and queries, status codes and log levels. These tests read the headers of
# the source tree (include/crmm, plugins/*/include/crmm) and compare.

SOURCE = pathlib.Path(__file__).resolve().parents[2]
HEADERS = sorted(SOURCE.glob("include/crmm/*.h")) + sorted(SOURCE.glob("plugins/*/include/crmm/*.h"))
needs_headers = pytest.mark.skipif(not HEADERS, reason="the C headers are not beside the tests")


def header_text():
    text = "\n".join(path.read_text() for path in HEADERS)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_constants():
    """Every `#define NAME value` and `NAME = value` of an enum, evaluated."""
    text = header_text()
    raw = dict(re.findall(r"#define\s+(CRMM_\w+)\s+([^\n]+)", text))
    raw.update(re.findall(r"\b(CRMM_\w+)\s*=\s*([^,}\n]+)", text))
    values = {}

    def value(name, depth=0):
        if name in values:
            return values[name]
        expr = re.sub(r"\(\s*crmm_\w+\s*\)", "", raw[name])  # casts
        expr = re.sub(r"\b(\d+|0x[0-9a-fA-F]+)u\b", r"\1", expr)
        expr = re.sub(r"\bCRMM_\w+\b", lambda m: str(value(m.group(0), depth + 1)), expr)
        values[name] = eval(expr, {"__builtins__": {}})  # noqa: S307 (integer expressions of our headers)
        return values[name]

    return raw, value


@needs_headers
def test_control_ops_and_queries_match_the_headers():
    from crmm import _lib

    raw, value = header_constants()
    for name, number in {**_lib.OPS, **_lib.QUERIES}.items():
        assert name in raw, f"{name} is in no header"
        assert value(name) == number, f"{name}: Python {number}, header {value(name)}"


@needs_headers
def test_queries_status_codes_log_levels_and_stream_flags_match_the_headers():
    from crmm import _errors
    from crmm.pylibrmm import logger, stream
    from crmm.pylibrmm.memory_resource import _memory_resource

    raw, value = header_constants()
    for key, number in _memory_resource.QUERIES.items():
        name = "CRMM_QUERY_" + key.upper()
        if type(number) is tuple:  # a plugin's own query: (kind, number), the kind in its name
            kind, number = number
            assert name.startswith(f"CRMM_QUERY_{kind.upper()}_"), name
        assert value(name) == number, name
    for number, (name, _cls) in _errors._BY_STATUS.items():
        assert value(name) == number, name
    for level in logger.level_enum:
        if level is logger.level_enum.n_levels:  # RMM's count of the levels, not one of C's
            assert level.value == value("CRMM_LOG_OFF") + 1
            continue
        assert value("CRMM_LOG_" + level.name.upper()) == level.value, level.name
    for flag in stream.CudaStreamFlags:
        assert value("CRMM_STREAM_" + flag.name) == flag.value, flag.name


C_TYPES = {
    "int": "int", "unsigned": "int", "crmm_status": "int", "crmm_query": "int", "crmm_log_level": "int",
    "bool": "bool", "size_t": "u64", "uint64_t": "u64", "double": "double", "void": "void",
    "long": "long", "int64_t": "long",
}


def c_kind(decl):
    """What a C parameter or return type is to ctypes: a pointer, a string or a scalar class."""
    if re.match(r"const\s+void\s*\*\s*\w*$", decl.strip()):
        return "bytes"  # read-only memory: a pointer, or Python bytes as c_char_p
    decl = re.sub(r"\bconst\b|\bstruct\b|\brestrict\b", " ", decl).strip()
    if "(*" in decl:
        return "pointer"  # a function pointer
    if "*" in decl:
        return "string" if re.match(r"char\s*\*\s*\w*$", decl) else "pointer"
    words = decl.split()
    base = words[0] if len(words) == 1 or words[0] not in ("unsigned",) else "unsigned"
    if base.startswith("crmm_") and base not in C_TYPES:
        return "pointer" if base.endswith("_fn") or base.endswith("_t") else "int"
    return C_TYPES.get(base, base)


def py_kind(t):
    if t is None:
        return "void"
    if t is ctypes.c_char_p:
        return "string"
    if t in (ctypes.c_void_p,) or isinstance(t, type) and issubclass(t, (ctypes._Pointer, ctypes._CFuncPtr)):
        return "pointer"
    # size_t and uint64_t are one ctypes type on the 64-bit Linux crmm runs on
    return {ctypes.c_int: "int", ctypes.c_uint: "int", ctypes.c_bool: "bool", ctypes.c_size_t: "u64",
            ctypes.c_uint64: "u64", ctypes.c_double: "double", ctypes.c_long: "long"}.get(t, repr(t))


def c_prototypes():
    text = re.sub(r"\s+", " ", header_text())
    found = {}
    for ret, name, args in re.findall(r"CRMM_API ([\w\s\*]+?)\s*\b(crmm_\w+)\s*\(([^;{]*?)\)\s*;", text):
        params = [] if args.strip() in ("", "void") else [a.strip() for a in re.split(r",(?![^()]*\))", args)]
        found[name] = (c_kind(ret), [c_kind(p) for p in params])
    return found


@needs_headers
def test_ctypes_prototypes_match_the_headers():
    from crmm import _lib, ipc

    declared = c_prototypes()
    for table in (_lib._PROTOTYPES, ipc._PROTOTYPES):
        for name, (restype, argtypes) in table.items():
            assert name in declared, f"{name} is in no header"
            ret, params = declared[name]
            assert len(argtypes) == len(params), f"{name}: {len(argtypes)} arguments in Python, {len(params)} in C"
            assert py_kind(restype) == ret, f"{name} returns {ret} in C, {py_kind(restype)} in Python"
            for i, (py, c) in enumerate(zip(argtypes, params)):
                # a char * may travel as a plain pointer (a buffer the caller owns)
                ok = py_kind(py) == c or (c, py_kind(py)) in {("string", "pointer"), ("bytes", "pointer"), ("bytes", "string")}
                assert ok, f"{name} argument {i}: C {c}, Python {py_kind(py)}"


def c_struct_members(tag):
    """[(name, kind)] of the members of `typedef struct tag {...} tag;`."""
    text = header_text()
    body = re.search(r"typedef struct " + tag + r"\s*\{(.*?)\}\s*" + tag + r"\s*;", text, re.S)
    assert body, f"struct {tag} is in no header"
    members = []
    for decl in (d.strip() for d in body.group(1).split(";")):
        pointer = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
        if pointer:
            members.append((pointer.group(1), "pointer"))
        elif decl:
            base, first = re.match(r"(.*?)(\**\s*\w+)$", decl.split(",")[0]).groups()
            for name in [first] + decl.split(",")[1:]:
                members.append((name.strip().lstrip("*").strip(), c_kind(base + ("*" if "*" in name else ""))))
    return members


@needs_headers
@pytest.mark.parametrize("py_name, tag", [("AllocCounters", "crmm_alloc_counters"), ("DeviceGuard", "crmm_device_guard"),
                                          ("FailureCallbackArgs", "crmm_failure_callback_args"), ("BinningBin", "crmm_binning_bin")])
def test_ctypes_structs_match_the_headers(py_name, tag):
    from crmm import _lib

    fields = [(name, py_kind(t)) for name, t in getattr(_lib, py_name)._fields_]
    assert fields == c_struct_members(tag)
