// Python keyword arguments into BoxOptions and ExecOptions through the option schema, so that
// CodeBox(...) and box.exec(...) check their options as the CLI and the JSON form do: an
// unknown name or a wrong type is a TypeError, a bad value a ValueError
// (codebox.BoxInvalidArgumentError), each naming the option as it was given.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cfloat>
#include <cmath>
#include <set>
#include <string>

#include "codebox/option_schema.h"
#include "module.h"

namespace py = pybind11;

namespace codebox::python {
namespace {

std::string TypeName(py::handle value) {
  return py::type::of(value).attr("__name__").cast<std::string>();
}

std::string Repr(py::handle value) {
  std::string r = py::repr(value).cast<std::string>();
  return r.size() > 60 ? r.substr(0, 57) + "..." : r;
}

[[noreturn]] void TypeErrorOf(const std::string& label, const std::string& wants,
                              py::handle value) {
  throw py::type_error(label + ": must be " + wants + ", got " + TypeName(value) + " " +
                       Repr(value));
}

std::string Text(py::handle value, const std::string& label) {
  if (!PyUnicode_Check(value.ptr())) TypeErrorOf(label, "a str", value);
  return value.cast<std::string>();
}

OptionValue EnvironmentFrom(py::handle value, const std::string& label) {
  OptionValue::Environment env;
  auto add = [&](py::handle key, py::handle v) {
    const std::string name = Text(key, label + " variable name");
    env.emplace_back(name, Text(v, label + "[" + name + "]"));
  };
  if (py::hasattr(value, "items") && !PyUnicode_Check(value.ptr())) {
    for (py::handle item : value.attr("items")()) {
      py::tuple kv = py::reinterpret_borrow<py::tuple>(item);
      add(kv[0], kv[1]);
    }
  } else if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    for (py::handle item : value) {
      if (!(PyList_Check(item.ptr()) || PyTuple_Check(item.ptr())) || py::len(item) != 2) {
        TypeErrorOf(label, "a list of (name, value) pairs", item);
      }
      py::sequence pair = py::reinterpret_borrow<py::sequence>(item);
      add(pair[0], pair[1]);
    }
  } else {
    TypeErrorOf(label, "a mapping of names to str, or a list of (name, value) pairs", value);
  }
  return OptionValue(std::move(env));
}

// A list or tuple of str (not one str: allow_hosts="pypi.org" would be its letters).
OptionValue ListFrom(py::handle value, const std::string& label) {
  if (!(PyList_Check(value.ptr()) || PyTuple_Check(value.ptr()))) {
    TypeErrorOf(label, "a list of strings", value);
  }
  OptionValue::List items;
  for (py::handle item : value) items.push_back(Text(item, label + " entry"));
  return OptionValue(std::move(items));
}

// secrets=[{"name": ..., "value": ..., "hosts": [...]}] or texts "NAME=VALUE@HOST"; no error
// shows a value (no repr of what was given).
OptionValue SecretsFrom(py::handle value, const std::string& label) {
  const std::string wants = "a list of {'name': str, 'value': str, 'hosts': [str, ...]}";
  if (!(PyList_Check(value.ptr()) || PyTuple_Check(value.ptr()))) {
    throw py::type_error(label + ": must be " + wants + ", got " + TypeName(value));
  }
  OptionValue::List items;
  for (py::handle item : value) {
    if (PyUnicode_Check(item.ptr())) {
      items.push_back(item.cast<std::string>());
      continue;
    }
    if (!PyDict_Check(item.ptr())) {
      throw py::type_error(label + ": must be " + wants + ", got an entry of type " +
                           TypeName(item));
    }
    py::dict d = py::reinterpret_borrow<py::dict>(item);
    auto text = [&](const char* key) -> std::string {
      if (!d.contains(key) || !PyUnicode_Check(py::handle(d[key]).ptr())) {
        throw py::type_error(label + ": each secret needs '" + key + "' as a str (" + wants + ")");
      }
      return d[key].cast<std::string>();
    };
    Secret secret{.name = text("name"), .value = text("value")};
    if (!d.contains("hosts") || PyUnicode_Check(py::handle(d["hosts"]).ptr())) {
      throw py::type_error(label + ": each secret needs 'hosts', a list of str");
    }
    for (py::handle host : d["hosts"]) secret.hosts.push_back(Text(host, label + " host"));
    if (py::len(d) != 3) throw py::type_error(label + ": a secret has only " + wants);
    auto option_text = SecretOptionText(secret);
    if (!option_text.ok()) Throw(option_text.status().WithContext(label));
    items.push_back(std::move(*option_text));
  }
  return OptionValue(std::move(items));
}

// The Python value as an OptionValue of a kind `spec` takes; TypeError otherwise.
OptionValue FromPython(const OptionSpec& spec, py::handle value, const std::string& label) {
  OptionValue v;
  if (value.is_none()) {
    return v;
  } else if (spec.name == "secrets") {
    return SecretsFrom(value, label);
  } else if (PyBool_Check(value.ptr())) {
    v = OptionValue(value.cast<bool>());
  } else if (PyLong_Check(value.ptr()) || PyIndex_Check(value.ptr())) {  // int, numpy ints
    py::int_ number = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
    if (!number) throw py::error_already_set();
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
    // Past int64 it is out of every bound; a finite stand-in keeps it from reading as inf.
    v = overflow == 0 ? OptionValue(static_cast<int64_t>(n))
                      : OptionValue(overflow > 0 ? DBL_MAX : -DBL_MAX);
  } else if (PyFloat_Check(value.ptr())) {
    v = OptionValue(value.cast<double>());
  } else if (PyUnicode_Check(value.ptr())) {
    v = OptionValue(value.cast<std::string>());
  } else if (PyBytes_Check(value.ptr()) && spec.type == OptionType::kData) {
    v = OptionValue(std::string(value.cast<py::bytes>()));
  } else if (spec.type == OptionType::kString && py::hasattr(value, "__fspath__")) {
    v = OptionValue(Text(py::module_::import("os").attr("fspath")(value), label));
  } else if (spec.type == OptionType::kEnvironment) {
    v = EnvironmentFrom(value, label);
  } else if (spec.type == OptionType::kList) {
    v = ListFrom(value, label);
  } else {
    v = OptionValue(OptionValue::Environment{});  // a kind no other option takes
  }
  Status st = CheckOptionKind(spec, v, label);
  if (!st.ok()) {
    // The schema's words for what it takes, and the Python type that was given.
    const std::string& message = st.message();
    throw py::type_error(message.substr(0, message.find(", got ")) + ", got " + TypeName(value) +
                         " " + Repr(value));
  }
  return v;
}

py::object ToPython(const OptionSpec& spec, const OptionValue& v) {
  using K = OptionValue::Kind;
  switch (v.kind()) {
    case K::kNull:
      return py::none();
    case K::kBool:
      return py::bool_(v.as_bool());
    case K::kInteger:
      return py::int_(v.as_integer());
    case K::kNumber:
      return py::float_(v.as_number());
    case K::kString:
      // A timeout's "none" is None in Python (CodeBox(timeout=None): no limit).
      if (spec.type == OptionType::kDuration && v.as_string() == "none") return py::none();
      if (spec.type == OptionType::kData) return py::bytes(v.as_string());
      return py::str(v.as_string());
    case K::kEnvironment: {
      py::dict env;
      for (const auto& [k, value] : v.as_environment()) env[py::str(k)] = py::str(value);
      return env;
    }
    case K::kList: {
      py::list items;
      for (const std::string& item : v.as_list()) items.append(py::str(item));
      return items;
    }
  }
  return py::none();
}

// Sets each keyword through `set`; two spellings of one option are a TypeError.
template <class Options, class Set>
Options FromDict(const OptionSchema& schema, const py::dict& kwargs, Set set) {
  Options options;
  std::map<std::string_view, std::string> given;  // option name -> the keyword used
  for (const auto& [key_obj, value] : kwargs) {
    if (!PyUnicode_Check(key_obj.ptr())) throw py::type_error("option names must be str");
    const std::string key = py::cast<std::string>(key_obj);
    OptionMatch match = FindOption(schema, key);
    if (!match || key.find('-') != std::string::npos) {
      throw py::type_error(UnknownOptionError(schema, key).message());
    }
    auto [it, fresh] = given.emplace(match.spec->name, key);
    if (!fresh) {
      throw py::type_error("option " + std::string(match.spec->name) + " is given twice, as '" +
                           it->second + "' and as '" + key + "'");
    }
    Status st = set(&options, key, FromPython(*match.spec, value, key), key);
    if (!st.ok()) Throw(st);
  }
  return options;
}

py::list SchemaToPython(const OptionSchema& schema, bool box) {
  py::list out;
  for (const OptionSpec& spec : schema) {
    py::dict d;
    d["name"] = std::string(spec.name);
    d["type"] = std::string(OptionTypeName(spec.type));
    d["unit"] = std::string(spec.unit);
    d["help"] = std::string(spec.help);
    py::list aliases;
    for (const OptionAlias& a : spec.aliases) {
      aliases.append(py::make_tuple(std::string(a.name), a.scale, std::string(a.unit)));
    }
    d["aliases"] = aliases;
    py::list choices;
    for (std::string_view c : spec.choices) choices.append(std::string(c));
    d["choices"] = choices;
    d["min"] = spec.has_bounds ? py::object(py::float_(spec.min)) : py::none();
    d["max"] = spec.has_bounds ? py::object(py::float_(spec.max)) : py::none();
    d["min_exclusive"] = spec.min_exclusive;
    d["allows_none"] = spec.allows_none;
    d["default"] = ToPython(spec, box ? GetBoxOption(BoxOptions{}, spec.name)
                                      : GetExecOption(ExecOptions{}, spec.name));
    d["flag"] = box ? py::object(py::str(spec.Flag())) : py::none();
    out.append(d);
  }
  return out;
}

}  // namespace

BoxOptions BoxOptionsFromDict(const py::dict& kwargs) {
  BoxOptions options = FromDict<BoxOptions>(BoxOptionSchema(), kwargs, &SetBoxOption);
  if (Status st = options.Validate(); !st.ok()) Throw(st);
  return options;
}

ExecOptions ExecOptionsFromDict(const py::dict& kwargs) {
  return FromDict<ExecOptions>(ExecOptionSchema(), kwargs, &SetExecOption);
}

py::dict BoxOptionsToDict(const BoxOptions& options) {
  py::dict out;
  for (const OptionSpec& spec : BoxOptionSchema()) {
    out[py::str(std::string(spec.name))] = ToPython(spec, GetBoxOption(options, spec.name));
  }
  return out;
}

void BindOptions(py::module_& m) {
  py::class_<ExecOptions>(m, "ExecOptions");  // opaque: made by exec_options(), read by Box.exec
  m.def(
      "box_options",
      [](const py::dict& kwargs) { return BoxOptionsToDict(BoxOptionsFromDict(kwargs)); },
      py::arg("options"),
      "Checks box options (names, aliases, types, bounds); returns every option by its name, "
      "resolved (defaults filled in, aliases in the option's unit).");
  m.def("exec_options", &ExecOptionsFromDict, py::arg("options"),
        "Checks exec options; returns them for Box.exec.");
  m.def("box_option_schema", [] { return SchemaToPython(BoxOptionSchema(), true); });
  m.def("exec_option_schema", [] { return SchemaToPython(ExecOptionSchema(), false); });
}

}  // namespace codebox::python
