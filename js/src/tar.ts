// The few tar (ustar) archives copyIn / copyOut move: regular files and directories only,
// relative paths without "..". A box's archive is hostile input: every other entry (links,
// devices, absolute or escaping paths) is skipped, and sizes are bounded by the caller.
import { lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve, sep } from "node:path";
import { LimitExceededError, ProtocolError } from "./errors.js";

const BLOCK = 512;

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, "0") + "\0";
}

function header(name: string, mode: number, size: number, type: "0" | "5"): Buffer {
  const h = Buffer.alloc(BLOCK);
  let path = Buffer.from(name, "utf8");
  let prefix = Buffer.alloc(0);
  if (path.length > 100) {
    // ustar splits a long path at a "/" into prefix (155) and name (100).
    const cut = name.lastIndexOf("/", name.length - 1);
    prefix = Buffer.from(name.slice(0, cut), "utf8");
    path = Buffer.from(name.slice(cut + 1), "utf8");
    if (cut < 0 || prefix.length > 155 || path.length > 100) throw new LimitExceededError(`copyIn: the path ${name.slice(0, 64)}... is too long for tar`, "limit_exceeded");
  }
  path.copy(h, 0);
  h.write(octal(mode & 0o777, 8), 100, "ascii");
  h.write(octal(0, 8), 108, "ascii");
  h.write(octal(0, 8), 116, "ascii");
  h.write(octal(size, 12), 124, "ascii");
  h.write(octal(Math.floor(Date.now() / 1000), 12), 136, "ascii");
  h.write("        ", 148, "ascii");
  h.write(type, 156, "ascii");
  h.write("ustar\0" + "00", 257, "ascii");
  prefix.copy(h, 345);
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(octal(sum, 7) + " ", 148, "ascii");
  return h;
}

/** A tar of the host directory `dir`'s regular files and directories (symlinks and the rest
 * are left out, as the server would refuse them). */
export function packDirectory(dir: string): Buffer {
  const parts: Buffer[] = [];
  const walk = (abs: string, rel: string) => {
    for (const name of readdirSync(abs).sort()) {
      const path = join(abs, name);
      const relPath = rel ? `${rel}/${name}` : name;
      const st = lstatSync(path);
      if (st.isDirectory()) {
        parts.push(header(relPath + "/", st.mode, 0, "5"));
        walk(path, relPath);
      } else if (st.isFile()) {
        const data = readFileSync(path);
        parts.push(header(relPath, st.mode, data.length, "0"), data, Buffer.alloc((BLOCK - (data.length % BLOCK)) % BLOCK));
      }
    }
  };
  walk(dir, "");
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

function text(block: Buffer, start: number, length: number): string {
  const field = block.subarray(start, start + length);
  const end = field.indexOf(0);
  return field.subarray(0, end < 0 ? length : end).toString("utf8");
}

/** Unpacks a box's tar into the host directory `dest`: regular files and directories whose
 * paths stay inside it, permission bits only. */
export function unpackInto(archive: Buffer, dest: string): void {
  const root = resolve(dest);
  mkdirSync(root, { recursive: true });
  for (let at = 0; at + BLOCK <= archive.length;) {
    const block = archive.subarray(at, at + BLOCK);
    if (block.every((b) => b === 0)) break;
    const size = parseInt(text(block, 124, 12).trim() || "0", 8);
    if (!Number.isSafeInteger(size) || size < 0 || at + BLOCK + size > archive.length) {
      throw new ProtocolError("copyOut: the box's tar archive is malformed", "protocol_error");
    }
    const prefix = text(block, 345, 155);
    const name = (prefix ? `${prefix}/` : "") + text(block, 0, 100);
    const type = String.fromCharCode(block[156] || 48);
    const mode = parseInt(text(block, 100, 8).trim() || "644", 8) & 0o777;
    const target = resolve(root, name.replace(/^\.\//, ""));
    const inside = target === root || target.startsWith(root + sep);
    if (inside && !name.startsWith("/")) {
      if (type === "5") mkdirSync(target, { recursive: true, mode: mode | 0o700 });
      else if (type === "0") {
        mkdirSync(resolve(target, ".."), { recursive: true });
        writeFileSync(target, archive.subarray(at + BLOCK, at + BLOCK + size), { mode });
      }
    }
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
  }
}
