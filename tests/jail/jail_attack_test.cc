// Attacks from inside a real jail box on the agent (PID 1), on the host's paths as seen in
// the box's mount table, on masked /proc entries and on the syscalls seccomp refuses.
#include <libgen.h>

#include <map>
#include <sstream>

#include "base/paths.h"
#include "jail_fixture.h"

namespace codebox::jail::testing {
namespace {

// "name result" lines into a map.
std::map<std::string, std::string> Lines(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    size_t sp = line.find(' ');
    if (sp != std::string::npos) m[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return m;
}

bool Denied(const std::string& result) { return result == "EACCES" || result == "EPERM"; }

std::string Dirname(const std::string& path) {
  std::string copy = path;
  return ::dirname(copy.data());
}

// The attack measured against the old agent: box code (same uid as the agent) reads the
// agent's program counter from /proc/1/syscall and writes code there through /proc/1/mem.
TEST_F(JailTest, BoxCodeCannotReachTheAgentsMemoryOrFds) {
  StartBox(Config());
  auto probe = Python(
      "import os, errno\n"
      "def err(e): return errno.errorcode.get(e.errno, str(e.errno))\n"
      "def read(name, path):\n"
      "    try:\n"
      "        with open(path, 'rb') as f: data = f.read()\n"
      "        print(name, 'read', len(data))\n"
      "    except OSError as e: print(name, err(e))\n"
      "def opened(name, path, flags):\n"
      "    try:\n"
      "        os.close(os.open(path, flags)); print(name, 'opened')\n"
      "    except OSError as e: print(name, err(e))\n"
      "def link(name, path):\n"
      "    try: print(name, 'link', os.readlink(path))\n"
      "    except OSError as e: print(name, err(e))\n"
      "read('syscall', '/proc/1/syscall')\n"
      "opened('mem_rw', '/proc/1/mem', os.O_RDWR)\n"
      "opened('mem_ro', '/proc/1/mem', os.O_RDONLY)\n"
      "read('environ', '/proc/1/environ')\n"
      "read('maps', '/proc/1/maps')\n"
      "read('auxv', '/proc/1/auxv')\n"
      "link('fd3', '/proc/1/fd/3')\n"
      "link('exe', '/proc/1/exe')\n"
      "link('cwd', '/proc/1/cwd')\n"
      "opened('fd3_open', '/proc/1/fd/3', os.O_RDWR)\n"
      // The agent's children are box code and dumpable again after execve: their own /proc
      // entries work, and they hold only stdin/stdout/stderr (the agent's fds do not leak).
      "read('self_maps', '/proc/self/maps')\n"
      "print('self_fds', ','.join(sorted(os.listdir('/proc/self/fd'))))\n");
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  auto r = Lines(probe.out);
  for (const char* name :
       {"syscall", "mem_rw", "mem_ro", "environ", "maps", "auxv", "fd3", "exe", "cwd"}) {
    EXPECT_TRUE(Denied(r[name])) << name << ": " << r[name] << "\n" << probe.out;
  }
  EXPECT_NE(r["fd3_open"], "opened") << probe.out;
  EXPECT_EQ(r["self_maps"].rfind("read ", 0), 0u) << probe.out;
  // 0-2, plus the directory listdir itself opened.
  EXPECT_EQ(r["self_fds"], "0,1,2,3") << probe.out;

  // The real attack, as far as the kernel lets it go: ud2 at the agent's resume address.
  // On an agent that is still dumpable this kills it, and the checks below fail loudly.
  auto attack = Python(
      "import os, errno\n"
      "try:\n"
      "    pc = int(open('/proc/1/syscall').read().split()[-1], 16)\n"
      "except Exception as e:\n"
      "    print('pc', type(e).__name__); pc = None\n"
      "try:\n"
      "    fd = os.open('/proc/1/mem', os.O_RDWR)\n"
      "except OSError as e:\n"
      "    print('open', errno.errorcode[e.errno]); fd = None\n"
      "if fd is not None and pc is not None:\n"
      "    os.pwrite(fd, b'\\x0f\\x0b' * 8, pc)\n"
      "    print('wrote', hex(pc))\n");
  EXPECT_EQ(attack.out.find("wrote"), std::string::npos) << attack.out;
  EXPECT_NE(attack.out.find("open EACCES"), std::string::npos) << attack.out << attack.err;
  // The agent still answers, correctly.
  auto alive = Sh("echo alive; echo $((6 * 7))");
  EXPECT_EQ(alive.exit_code, 0) << alive.err;
  EXPECT_EQ(alive.out, "alive\n42\n");
}

TEST_F(JailTest, MountTableShowsNoHostPath) {
  StartBox(Config());
  auto r = Sh("cat /proc/self/mountinfo; echo ===; cat /proc/self/mounts; echo ===; "
              "cat /proc/1/mountinfo 2>/dev/null; "
              "test -e /.codebox/codebox-agent && echo AGENT-FILE; "
              "true");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string agent = AgentPath();
  std::vector<std::string> host_paths = {rootfs_,
                                         Dirname(rootfs_),
                                         base::CodeboxHome(),
                                         agent,
                                         Dirname(agent),
                                         Dirname(Dirname(agent)),
                                         "/run/codebox-jail",
                                         "/tmp/codebox-jail-",
                                         "/var/lib/codebox"};
  for (const std::string& p : host_paths) {
    if (p.size() < 5) continue;  // "/", "/tmp": not a revealing name
    EXPECT_EQ(r.out.find(p), std::string::npos) << "host path " << p << " visible in:\n" << r.out;
  }
  // Still the expected shape: the root, /proc, the writable tmpfs.
  EXPECT_NE(r.out.find(" / / "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" /proc "), std::string::npos) << r.out;
  // The agent runs from a memfd: no file, no mount of it.
  EXPECT_EQ(r.out.find("codebox-agent"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("AGENT-FILE"), std::string::npos) << r.out;
}

TEST_F(JailTest, ProcEntriesAreMaskedAndStayMasked) {
  StartBox(Config());
  auto r = Python(
      "import os, errno, ctypes\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "def err(e): return errno.errorcode.get(e.errno, str(e.errno))\n"
      "masked_files = ['kcore', 'keys', 'timer_list', 'sched_debug', 'latency_stats',\n"
      "                'timer_stats', 'interrupts', 'cmdline', 'config.gz', 'kallsyms',\n"
      "                'sysrq-trigger']\n"
      "masked_dirs = ['acpi', 'scsi', 'asound']\n"
      "readonly = ['sys', 'irq', 'bus', 'fs']\n"
      "def umount(path):\n"
      "    ctypes.set_errno(0)\n"
      "    rc = libc.umount2(path.encode(), 2)\n"  // MNT_DETACH
      "    return 'ok' if rc == 0 else errno.errorcode[ctypes.get_errno()]\n"
      "mounts = open('/proc/self/mountinfo').read().split('\\n')\n"
      "mounted = {l.split()[4]: l.split()[5].split(',') for l in mounts if l}\n"
      "for n in masked_files + masked_dirs + readonly:\n"
      "    p = '/proc/' + n\n"
      "    if not os.path.lexists(p): print(n, 'absent'); continue\n"
      "    if p not in mounted: print(n, 'NOT-MOUNTED'); continue\n"
      "    if n in masked_files:\n"
      "        try: what = 'len%d' % len(open(p, 'rb').read())\n"
      "        except OSError as e: what = err(e)\n"
      "    elif n in masked_dirs:\n"
      "        what = 'entries%d' % len(os.listdir(p))\n"
      "    else:\n"
      "        what = 'ro' if 'ro' in mounted[p] else 'RW'\n"
      "        if n == 'sys':\n"
      "            try: open(p + '/kernel/hostname', 'w').close(); what += '-WRITABLE'\n"
      "            except OSError as e: what += '-' + err(e)\n"
      "    print(n, what, umount(p))\n"
      "print('hostname', open('/proc/sys/kernel/hostname').read().strip())\n"
      "print('after', ' '.join(sorted(x for x in mounted if x.startswith('/proc/'))))\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto m = Lines(r.out);
  int checked = 0;
  for (const char* n : {"kcore", "keys", "timer_list", "sched_debug", "latency_stats",
                        "timer_stats", "interrupts", "cmdline", "config.gz", "kallsyms",
                        "sysrq-trigger"}) {
    if (m[n] == "absent") continue;
    ++checked;
    // Empty (a /dev/null bind) and not unmountable.
    EXPECT_EQ(m[n], "len0 EPERM") << n << "\n" << r.out;
  }
  for (const char* n : {"acpi", "scsi", "asound"}) {
    if (m[n] == "absent") continue;
    ++checked;
    EXPECT_EQ(m[n], "entries0 EPERM") << n << "\n" << r.out;
  }
  for (const char* n : {"sys", "irq", "bus", "fs"}) {
    if (m[n] == "absent") continue;
    ++checked;
    EXPECT_EQ(m[n], std::string(n) == "sys" ? "ro-EROFS EPERM" : "ro EPERM") << n << "\n" << r.out;
  }
  // These exist on every kernel this runs on; the rest depend on its config.
  EXPECT_NE(m["keys"], "absent");
  EXPECT_NE(m["cmdline"], "absent");
  EXPECT_NE(m["sys"], "absent");
  EXPECT_GE(checked, 5) << r.out;
  EXPECT_EQ(m["hostname"], "codebox") << r.out;  // /proc/sys stays readable
}

TEST_F(JailTest, SeccompRefusesLdtSecretMemoryAndOddSocketFamilies) {
  StartBox(Config());
  auto r = Python(
      "import ctypes, os, errno, socket\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "def call(name, nr, *args):\n"
      "    ctypes.set_errno(0)\n"
      "    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]\n"
      "    rc = libc.syscall(ctypes.c_long(nr), *args)\n"
      "    print(name, 'ok' if rc >= 0 else errno.errorcode[ctypes.get_errno()])\n"
      "buf = ctypes.create_string_buffer(16)\n"
      "call('modify_ldt', 154, 0, buf, 16)\n"  // read the LDT: allowed by the kernel
      "call('memfd_secret', 447, 0)\n"
      "call('process_madvise', 440, -1, 0, 0, 0, 0)\n"
      "families = {'vsock': 40, 'alg': 38, 'packet': 17, 'key': 15, 'bluetooth': 31,\n"
      "            'rds': 21, 'tipc': 30, 'can': 29, 'xdp': 44, 'unspec_high': 0x100000002}\n"
      "for name, fam in families.items():\n"
      "    call('socket_' + name, 41, fam, 1 if name != 'alg' else 5, 0)\n"
      "    call('socketpair_' + name, 53, fam, 1, 0, buf)\n"
      // What model code uses keeps working.
      "a, b = socket.socketpair(); a.send(b'x'); print('unix', b.recv(1))\n"
      "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
      "s.bind(('127.0.0.1', 0)); s.listen()\n"
      "c = socket.create_connection(s.getsockname()); print('inet', 'ok')\n"
      "s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); print('inet6', 'ok')\n"
      "n = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); print('netlink', 'ok')\n"
      "print('gai', socket.getaddrinfo('localhost', 80)[0][4][0] in ('127.0.0.1', '::1'))\n");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto m = Lines(r.out);
  EXPECT_EQ(m["modify_ldt"], "EPERM") << r.out;
  EXPECT_EQ(m["memfd_secret"], "EPERM") << r.out;
  EXPECT_EQ(m["process_madvise"], "EPERM") << r.out;
  for (const char* f : {"vsock", "alg", "packet", "key", "bluetooth", "rds", "tipc", "can", "xdp",
                        "unspec_high"}) {
    EXPECT_EQ(m[std::string("socket_") + f], "EAFNOSUPPORT") << f << "\n" << r.out;
    EXPECT_EQ(m[std::string("socketpair_") + f], "EAFNOSUPPORT") << f << "\n" << r.out;
  }
  EXPECT_EQ(m["unix"], "b'x'");
  EXPECT_EQ(m["inet"], "ok");
  EXPECT_EQ(m["inet6"], "ok");
  EXPECT_EQ(m["netlink"], "ok");
  EXPECT_EQ(m["gai"], "True") << r.out;
}

// Threads, processes, sockets and, where the image has it, the scientific stack under the
// tightened filter.
TEST_F(JailTest, OrdinaryPythonWorksUnderTheFilter) {
  StartBox(Config());
  auto r = Python(
      "import os, uuid, asyncio, multiprocessing, subprocess, ssl, hashlib, sqlite3, socket\n"
      "import concurrent.futures as cf\n"
      "async def main(): await asyncio.sleep(0); return 'ok'\n"
      "print('asyncio', asyncio.run(main()))\n"
      "with multiprocessing.Pool(2) as p: print('pool', sum(p.map(abs, [-1, -2, 3])))\n"
      "with cf.ThreadPoolExecutor(4) as ex: print('threads', sum(ex.map(abs, [-1, 2])))\n"
      "print('subprocess', subprocess.run(['sh', '-c', 'echo hi'], capture_output=True).stdout)\n"
      "print('uuid', len(str(uuid.uuid4())), uuid.getnode() > 0)\n"
      "print('ssl', ssl.create_default_context() is not None,\n"
      "      hashlib.sha256(b'').hexdigest()[:4])\n"
      "print('sqlite', sqlite3.connect(':memory:').execute('select 6*7').fetchone()[0])\n"
      "print('hostname', socket.gethostname())\n"
      "try:\n"
      "    import numpy as np, pandas as pd\n"
      "    import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"
      "except ImportError:\n"
      "    print('scientific absent')\n"
      "else:\n"
      "    a = np.arange(100000, dtype=np.float64)\n"
      "    df = pd.DataFrame({'x': range(10)})\n"
      "    plt.plot([1, 2, 3]); plt.savefig('/tmp/p.png')\n"
      "    print('scientific', float(a @ a) > 0, int(df.x.sum()),\n"
      "          os.path.getsize('/tmp/p.png') > 0)\n",
      60000);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string common =
      "asyncio ok\npool 6\nthreads 3\nsubprocess b'hi\\n'\nuuid 36 True\nssl True e3b0\n"
      "sqlite 42\nhostname codebox\n";
  if (r.out.find("scientific absent") != std::string::npos) {
    // The `python` image carries only the standard library; python-data has the rest.
    EXPECT_EQ(r.out, common + "scientific absent\n") << r.err;
    RecordProperty("scientific_stack", "not in this image");
  } else {
    EXPECT_EQ(r.out, common + "scientific True 45 True\n") << r.err;
  }
}

}  // namespace
}  // namespace codebox::jail::testing
