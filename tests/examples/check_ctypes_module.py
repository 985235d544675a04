#!/usr/bin/env python3
"""ctest: python/cutenative_ctypes.py (the ctypes mirror of the C ABI that the examples and scripts share)
matches capi/include/cutenative.h and the built library.

    check_ctypes_module.py <libcutenative.so>

From the header (parsed here, independently of the module): every #define CN_* number and enum value is a
module constant of the same name and value; every struct is the module's class with the same field names and
ctypes types in the same order; every CN_API function is in PROTOTYPES with the restype and argtypes its C
types map to, and PROTOTYPES has no other function. From the library: the module loads it (every symbol, ABI
equal to the header's), each *_init sets struct_size to the class's ctypes.sizeof, and cn_status_name names
every status as its enum constant does. Standard library only."""
import ctypes
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
sys.path.insert(0, os.path.join(root, "python"))
import cutenative_ctypes as cn  # noqa: E402

failures = []
checks = 0


def expect(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)


text = open(os.path.join(root, "capi", "include", "cutenative.h"), encoding="utf-8").read()
code = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
code = re.sub(r"//[^\n]*", " ", code)

# ---- constants: #define CN_X <number>[u|ull] and enum values ----
constants = {m[0]: int(m[1]) for m in re.findall(r"#define\s+(CN_\w+)\s+(\d+)[uUlL]*\s*$", code, flags=re.M)}
enums = {}
for name, body, tail in re.findall(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", code, flags=re.S):
    expect(name == tail, "enum %s: typedef name %s" % (name, tail))
    enums[name] = {}
    for entry in body.split(","):
        if entry.strip():
            m = re.fullmatch(r"\s*(CN_\w+)\s*=\s*(\d+)\s*", entry)
            expect(m is not None, "enum %s: cannot parse %r" % (name, entry.strip()))
            if m:
                enums[name][m[1]] = int(m[2])
                constants[m[1]] = int(m[2])
expect(len(enums) >= 5 and len(constants) >= 30, "header parse: %d enums, %d constants" % (len(enums), len(constants)))
for k, v in constants.items():
    expect(getattr(cn, k, None) == v, "constant %s: header %d, module %r" % (k, v, getattr(cn, k, None)))
module_constants = {k for k in vars(cn) if re.fullmatch(r"CN_[A-Z0-9_]+", k)}
expect(module_constants == set(constants), "module constants not in the header: %s; header constants not in the "
       "module: %s" % (sorted(module_constants - set(constants)), sorted(set(constants) - module_constants)))

# ---- C types -> ctypes ----
SCALARS = {"char": ctypes.c_char, "float": ctypes.c_float, "double": ctypes.c_double, "size_t": ctypes.c_size_t, "int32_t": ctypes.c_int32,
           "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
           "uint8_t": ctypes.c_uint8}
structs = {}
for name, body, tail in re.findall(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", code, flags=re.S):
    expect(name == tail, "struct %s: typedef name %s" % (name, tail))
    fields = []
    for decl in body.split(";"):
        if decl.strip():
            s = re.fullmatch(r"\s*const\s+char\s*\*\s*(\w+)\s*", decl)  # a string field
            if s:
                fields.append((s[1], ctypes.c_char_p))
                continue
            m = re.fullmatch(r"\s*(\w+)\s+(\w+)\s*", decl)
            expect(m is not None and m[1] in SCALARS, "struct %s: cannot map %r" % (name, decl.strip()))
            if m and m[1] in SCALARS:
                fields.append((m[2], SCALARS[m[1]]))
    structs[name] = fields
opaque = set(re.findall(r"typedef\s+struct\s+(\w+)\s+\1\s*;", code))
expect(set(structs) == set(cn.STRUCTS), "structs: header %s, module %s" % (sorted(structs), sorted(cn.STRUCTS)))
for name, fields in structs.items():
    cls = cn.STRUCTS.get(name)
    if cls is not None:
        got = [(f[0], f[1]) for f in cls._fields_]
        diff = [(i, a, b) for i, (a, b) in enumerate(zip(fields + [None] * len(got), got + [None] * len(fields)))
                if a != b]
        expect(not diff, "struct %s: first difference at field %d: header %s, module %s" % (
            name, diff[0][0], *("%s %s" % (f[0], f[1].__name__) if f else "(none)" for f in diff[0][1:]))
            if diff else "")


def ctype_of(decl, where):
    """The ctypes type of a C type (a parameter's name already removed)."""
    const_pointee = re.match(r"\s*const\b", decl) is not None
    stars = decl.count("*")
    base = re.sub(r"\bconst\b|\*", " ", decl).split()
    if len(base) != 1:
        failures.append("%s: cannot parse type %r" % (where, decl))
        return None
    base = base[0]
    if base == "void":
        return None if stars == 0 else ctypes.c_void_p
    if base in opaque:  # handles: T* is a c_void_p, T** its out-parameter
        return {1: ctypes.c_void_p, 2: ctypes.POINTER(ctypes.c_void_p)}[stars]
    if base in enums:
        t = ctypes.c_int
    elif base in structs:
        t = cn.STRUCTS[base]
    elif base in SCALARS:
        t = SCALARS[base]
    else:
        failures.append("%s: unknown type %r" % (where, decl))
        return None
    if base == "char" and stars >= 1 and const_pointee:  # const char* is a string, const char** an array of them
        t, stars = ctypes.c_char_p, stars - 1
    for _ in range(stars):
        t = ctypes.POINTER(t)
    return t


def tname(t):
    return "None" if t is None else t.__name__


decls = re.sub(r"^\s*#.*$", " ", code, flags=re.M)  # without the preprocessor lines (#define CN_API ...)
protos = {}
for ret, name, params in re.findall(r"CN_API\s+([^;(]*?)\b(cn_\w+)\s*\(([^)]*)\)\s*;", decls, flags=re.S):
    restype = ctype_of(ret, name + " result")
    argtypes = []
    if params.strip() != "void":
        for i, p in enumerate(params.split(",")):
            m = re.fullmatch(r"(.*?[\s*])(\w+)\s*", p.strip() + " ")
            if m is None:
                failures.append("%s: cannot parse parameter %r" % (name, p))
                continue
            argtypes.append(ctype_of(m[1], "%s parameter %d" % (name, i + 1)))
    protos[name] = (restype, argtypes)
n_api = len(re.findall(r"\bCN_API\b", decls))
expect(len(protos) == n_api, "header parse: %d CN_API declarations, %d prototypes parsed" % (n_api, len(protos)))
expect(list(protos) == list(cn.PROTOTYPES), "functions: only in the header %s, only in the module %s, or in "
       "another order" % (sorted(set(protos) - set(cn.PROTOTYPES)), sorted(set(cn.PROTOTYPES) - set(protos))))
for name, (restype, argtypes) in protos.items():
    if name in cn.PROTOTYPES:
        r2, a2 = cn.PROTOTYPES[name]
        expect((r2, list(a2)) == (restype, argtypes), "%s: header %s(%s), module %s(%s)" % (
            name, tname(restype), ", ".join(map(tname, argtypes)), tname(r2), ", ".join(map(tname, a2))))

# ---- the library ----
if len(sys.argv) > 1:
    lib = cn.load_library(sys.argv[1])  # every symbol of PROTOTYPES, ABI compatible
    expect(cn.abi_version(lib) == (constants["CN_ABI_VERSION_MAJOR"], constants["CN_ABI_VERSION_MINOR"]),
           "library ABI %d.%d, header %d.%d" % (cn.abi_version(lib) + (constants["CN_ABI_VERSION_MAJOR"],
                                                                       constants["CN_ABI_VERSION_MINOR"])))
    for name, cls in cn.STRUCTS.items():
        s = cls()
        s.struct_size = 12345
        getattr(lib, name + "_init")(ctypes.byref(s))
        expect(s.struct_size == ctypes.sizeof(cls), "%s_init: struct_size %d, ctypes.sizeof %d"
               % (name, s.struct_size, ctypes.sizeof(cls)))
    for const, value in enums["cn_status"].items():
        got = cn.status_name(lib, value)
        expect(got == const[len("CN_STATUS_"):], "cn_status_name(%d) = %s, module constant %s" % (value, got, const))
    expect(cn.status_name(lib, max(enums["cn_status"].values()) + 1) == "UNKNOWN", "cn_status_name past the enum")

for f in failures:
    print("FAIL: " + f)
print("python/cutenative_ctypes.py against cutenative.h%s: %d constants, %d structs, %d functions; %d checks"
      % (" and " + sys.argv[1] if len(sys.argv) > 1 else "", len(constants), len(structs), len(protos), checks))
print("%d passed, %d failed" % (checks - len(failures), len(failures)))
sys.exit(1 if failures else 0)
