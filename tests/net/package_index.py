"""A package index of the test's own: wheels built here with zipfile (no build tools), laid out
as a PEP 503 "simple" index that servers.Servers serves under /simple/ and /files/."""
import base64
import hashlib
import html
import os
import re
import zipfile


def normalize(project):
    return re.sub(r"[-_.]+", "-", project).lower()


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def build_wheel(directory, project, version, module, source):
    """A pure-Python wheel of `project` with one module `module`.py holding `source`.
    Returns the wheel's file name (in `directory`)."""
    dist = f"{project.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    files = {
        f"{module}.py": source.encode(),
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
                             "Summary: a package of codebox's network tests\n").encode(),
        f"{info}/WHEEL": (b"Wheel-Version: 1.0\nGenerator: codebox-net-test\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
        f"{info}/top_level.txt": f"{module}\n".encode(),
    }
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in files.items())
    record += f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    name = f"{dist}-py3-none-any.whl"
    os.makedirs(directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return name


def write_index(root, wheels):
    """Lays out `root`/files/ (where the wheels already are) and `root`/simple/: a page per
    project linking its wheels with their sha256. `wheels`: {project: [wheel file names]}."""
    def page(title, links):
        items = "".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a><br/>\n'
                        for href, text in links)
        return (f"<!DOCTYPE html>\n<html><head><title>{html.escape(title)}</title></head>"
                f"<body>\n{items}</body></html>\n")

    os.makedirs(os.path.join(root, "simple"), exist_ok=True)
    projects = []
    for project, names in sorted(wheels.items()):
        slug = normalize(project)
        projects.append((f"{slug}/", slug))
        links = []
        for n in names:
            with open(os.path.join(root, "files", n), "rb") as f:
                links.append((f"../../files/{n}#sha256={hashlib.sha256(f.read()).hexdigest()}",
                              n))
        os.makedirs(os.path.join(root, "simple", slug), exist_ok=True)
        with open(os.path.join(root, "simple", slug, "index.html"), "w") as f:
            f.write(page(f"Links for {slug}", links))
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write(page("Simple index", projects))
