// _codebox.describe_host(**options): codebox::DescribeHost as plain dicts and lists, which
// codebox.describe_host() (python/codebox/_host.py) turns into dataclasses.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "codebox/host.h"
#include "module.h"

namespace py = pybind11;

namespace codebox::python {
namespace {

py::dict Describe(const py::kwargs& kwargs) {
  BoxOptions options = BoxOptionsFromDict(kwargs);
  HostDescription host;
  {
    // The probes spawn the jail helper and read /proc: no Python objects in reach.
    py::gil_scoped_release release;
    host = DescribeHost(options);
  }
  py::dict jail;
  jail["usable"] = host.jail.usable;
  jail["detail"] = host.jail.detail;
  jail["root"] = host.jail.root;
  jail["user_namespaces"] = host.jail.user_namespaces;
  jail["user_namespaces_detail"] = host.jail.user_namespaces_detail;
  jail["cgroup_version"] = host.jail.cgroup_version;
  jail["cgroup_controllers"] = host.jail.cgroup_controllers;
  jail["cgroup_missing"] = host.jail.cgroup_missing;
  jail["cgroup_hint"] = host.jail.cgroup_hint;
  py::dict vm;
  vm["kvm_usable"] = host.vm.kvm_usable;
  vm["kvm_detail"] = host.vm.kvm_detail;
  vm["tcg_usable"] = host.vm.tcg_usable;
  vm["tcg_detail"] = host.vm.tcg_detail;
  vm["qemu"] = host.vm.qemu;
  py::list limits, stores, images;
  for (const HostLimit& l : host.limits) {
    limits.append(py::dict(py::arg("name") = l.name, py::arg("enforced") = l.enforced,
                           py::arg("detail") = l.detail));
  }
  for (const HostStore& s : host.stores) {
    stores.append(py::dict(py::arg("path") = s.path, py::arg("kind") = s.kind,
                           py::arg("writable") = s.writable));
  }
  for (const HostImage& i : host.images) {
    images.append(py::dict(py::arg("name") = i.name, py::arg("built") = i.built,
                           py::arg("id") = i.id, py::arg("store") = i.store,
                           py::arg("detail") = i.detail, py::arg("digest") = i.digest));
  }
  py::dict d;
  d["jail"] = jail;
  d["vm"] = vm;
  d["driver_usable"] = host.driver_usable;
  d["driver"] = host.driver;
  d["driver_reason"] = host.driver_reason;
  d["limits"] = limits;
  d["stores"] = stores;
  d["images"] = images;
  return d;
}

}  // namespace

void BindHost(py::module_& m) {
  m.def("describe_host", &Describe,
        "What this host can do for codebox (drivers, limits, image stores, images); takes "
        "the CodeBox options that matter (driver, memory_mib, cpus, home, ...).");
}

}  // namespace codebox::python
