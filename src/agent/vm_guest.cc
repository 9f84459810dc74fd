// Guest-side init duties of codebox-agent as /init of a vm box's initramfs (the host side
// that assembles that initramfs is src/vm/initramfs.cc; the layout below must match it):
//   /modules/order      module files to load, dependencies first
//   /mnt/ro             the image disk (erofs on /dev/vda), read-only
//   /mnt/rw             tmpfs of codebox.disk= size: overlay upper and work dirs
//   /mnt/root           the overlay that becomes /
#include "agent/vm_guest.h"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <linux/random.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "agent/guest_limits.h"
#include "base/io.h"
#include "base/text.h"

namespace codebox::agent {
namespace {

constexpr const char* kPortName = "codebox.0";
bool g_boot_id_mounted = false;
constexpr auto kDeviceWait = std::chrono::seconds(20);

Status Mount(const char* source, const char* target, const char* type, unsigned long flags,
             const char* data = nullptr) {
  ::mkdir(target, 0755);
  if (::mount(source, target, type, flags, data) != 0) {
    return base::ErrnoStatus(std::string("mount ") + type + " on " + target);
  }
  return Status::Ok();
}

Status LoadModules() {
  auto order = base::ReadFile("/modules/order");
  if (!order.ok()) return order.status().WithContext("load modules");
  size_t pos = 0;
  while (pos < order->size()) {
    size_t end = order->find('\n', pos);
    if (end == std::string::npos) end = order->size();
    std::string file = "/modules/" + order->substr(pos, end - pos);
    pos = end + 1;
    if (file == "/modules/") continue;
    base::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return base::ErrnoStatus("load module: open " + file);
    // finit_module lets the kernel read (and check) the file itself; EEXIST means the
    // module is already there (built in or loaded), which is what we want.
    if (::syscall(SYS_finit_module, fd.get(), "", 0) != 0 && errno != EEXIST) {
      return base::ErrnoStatus("load module " + file);
    }
  }
  return Status::Ok();
}

// "codebox.disk=256M" from the kernel command line, in bytes.
uint64_t ScratchBytes() {
  uint64_t bytes = 256ull << 20;
  auto cmdline = base::ReadFile("/proc/cmdline");
  if (!cmdline.ok()) return bytes;
  const std::string key = "codebox.disk=";
  size_t at = cmdline->find(key);
  if (at == std::string::npos) return bytes;
  char* end = nullptr;
  uint64_t n = std::strtoull(cmdline->c_str() + at + key.size(), &end, 10);
  uint64_t unit = 1;
  switch (end != nullptr ? *end : '\0') {
    case 'K':
    case 'k':
      unit = 1ull << 10;
      break;
    case 'M':
    case 'm':
      unit = 1ull << 20;
      break;
    case 'G':
    case 'g':
      unit = 1ull << 30;
      break;
  }
  return n > 0 ? n * unit : bytes;
}

// Devices appear asynchronously after their driver loads; wait for them, bounded.
template <typename Probe>
bool WaitFor(Probe probe) {
  auto deadline = std::chrono::steady_clock::now() + kDeviceWait;
  while (!probe()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// /dev/vportNpM whose /sys/class/virtio-ports/vportNpM/name is ours; "" if none yet.
std::string FindPort() {
  std::string found;
  if (DIR* dir = ::opendir("/sys/class/virtio-ports")) {
    while (struct dirent* e = ::readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      auto name = base::ReadFile(std::string("/sys/class/virtio-ports/") + e->d_name + "/name");
      if (name.ok() && name->substr(0, name->find('\n')) == kPortName) {
        found = std::string("/dev/") + e->d_name;
      }
    }
    ::closedir(dir);
  }
  return found;
}

Status MountRoot() {
  if (!WaitFor([] { return ::access("/dev/vda", F_OK) == 0; })) {
    return NotFound("image disk /dev/vda did not appear");
  }
  RETURN_IF_ERROR(Mount("/dev/vda", "/mnt/ro", "erofs", MS_RDONLY));
  std::string tmpfs_opts = "mode=0755,size=" + std::to_string(ScratchBytes());
  RETURN_IF_ERROR(Mount("tmpfs", "/mnt/rw", "tmpfs", 0, tmpfs_opts.c_str()));
  ::mkdir("/mnt/rw/upper", 0755);
  ::mkdir("/mnt/rw/work", 0755);
  RETURN_IF_ERROR(Mount("overlay", "/mnt/root", "overlay", 0,
                        "lowerdir=/mnt/ro,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work"));
  for (const char* dir : {"dev", "proc", "sys"}) {
    std::string target = std::string("/mnt/root/") + dir;
    ::mkdir(target.c_str(), 0755);
    if (::mount((std::string("/") + dir).c_str(), target.c_str(), nullptr, MS_MOVE, nullptr) != 0) {
      return base::ErrnoStatus("move /" + std::string(dir) + " into the new root");
    }
  }
  // The initramfs is rootfs, which cannot be pivot_root'ed away: move the new root over /
  // and chroot into it (what switch_root does).
  if (::chdir("/mnt/root") != 0) return base::ErrnoStatus("chdir /mnt/root");
  if (::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) return base::ErrnoStatus("move root to /");
  if (::chroot(".") != 0) return base::ErrnoStatus("chroot");
  if (::chdir("/") != 0) return base::ErrnoStatus("chdir /");
  return Status::Ok();
}

void SetUpUserland() {
  ::mkdir("/work", 0755);
  ::mkdir("/tmp", 01777);
  (void)Mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "ptmxmode=0666,mode=0620");
  (void)Mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  ::symlink("/proc/self/fd", "/dev/fd");
  const char hostname[] = "codebox";
  ::sethostname(hostname, sizeof hostname - 1);
  // Loopback up (the kernel gives it 127.0.0.1 and ::1 then); there is no other interface.
  base::UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  struct ifreq ifr = {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (sock.valid() && ::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP;
    ::ioctl(sock.get(), SIOCSIFFLAGS, &ifr);
  }
}

StatusOr<base::UniqueFd> OpenPort() {
  std::string port;
  if (!WaitFor([&] { return !(port = FindPort()).empty(); })) {
    return NotFound(std::string("virtio-serial port '") + kPortName + "' did not appear");
  }
  if (!WaitFor([&] { return ::access(port.c_str(), F_OK) == 0; })) {
    return NotFound("device node " + port + " did not appear");
  }
  base::UniqueFd fd(::open(port.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) return base::ErrnoStatus("open " + port);
  // Until the host end is connected a read returns EOF at once; poll reports POLLHUP then.
  bool connected = WaitFor([&] {
    struct pollfd p = {fd.get(), POLLOUT, 0};
    return ::poll(&p, 1, 0) >= 0 && (p.revents & POLLHUP) == 0;
  });
  if (!connected) return Unavailable("host end of " + port + " never connected");
  return fd;
}

void Console(const std::string& line) {
  // stderr is the console when the kernel could open /dev/console for init; if it could
  // not, open it ourselves so the host's serial log still shows the reason.
  std::string text = "codebox-agent: " + line + "\n";
  if (::write(2, text.data(), text.size()) < 0) {
    base::UniqueFd console(::open("/dev/console", O_WRONLY | O_CLOEXEC | O_NOCTTY));
    if (console.valid()) (void)base::WriteAll(console.get(), text);
  }
}

void PrepareForHello();

StatusOr<base::UniqueFd> SetUp() {
  RETURN_IF_ERROR(Mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755"));
  RETURN_IF_ERROR(Mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC));
  RETURN_IF_ERROR(Mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC));
  RETURN_IF_ERROR(LoadModules());
  RETURN_IF_ERROR(MountRoot().WithContext("mount image"));
  SetUpUserland();
  PrepareForHello();
  return OpenPort();
}

Status ReseedRandom(const std::string& entropy) {
  base::UniqueFd random(::open("/dev/urandom", O_WRONLY | O_CLOEXEC));
  if (!random.valid()) return base::ErrnoStatus("open /dev/urandom");
  // struct rand_pool_info ends in a flexible array: the bytes follow the two counts.
  std::vector<int> info(2 + (entropy.size() + sizeof(int) - 1) / sizeof(int), 0);
  auto* pool = reinterpret_cast<struct rand_pool_info*>(info.data());
  pool->entropy_count = static_cast<int>(entropy.size() * 8);
  pool->buf_size = static_cast<int>(entropy.size());
  std::memcpy(pool->buf, entropy.data(), entropy.size());
  if (::ioctl(random.get(), RNDADDENTROPY, pool) != 0) return base::ErrnoStatus("RNDADDENTROPY");
  // Without this the kernel would go on with the CRNG state the template saved until its next
  // scheduled reseed: every clone's first random bytes the same.
  if (::ioctl(random.get(), RNDRESEEDCRNG) != 0) return base::ErrnoStatus("RNDRESEEDCRNG");
  return Status::Ok();
}

// 16 bytes from the (reseeded) kernel RNG as a version-4 UUID's text.
std::string RandomUuid() {
  unsigned char b[16] = {};
  for (size_t got = 0; got < sizeof b;) {
    ssize_t n = ::getrandom(b + got, sizeof b - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  std::string hex = base::HexEncode(std::string_view(reinterpret_cast<char*>(b), sizeof b));
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

// The kernel picks boot_id once per boot and offers no way to change it: a file of ours is
// mounted over it at boot (so a template has the mount already), and each hello writes a new
// id into that file.
constexpr const char* kBootIdFile = "/dev/.codebox-boot_id";

Status MountBootIdFile() {
  auto current = base::ReadFile("/proc/sys/kernel/random/boot_id");
  RETURN_IF_ERROR(base::WriteFile(kBootIdFile, current.ok() ? *current : RandomUuid() + "\n"));
  if (::mount(kBootIdFile, "/proc/sys/kernel/random/boot_id", nullptr, MS_BIND, nullptr) != 0) {
    return base::ErrnoStatus("mount a file over boot_id");
  }
  return Status::Ok();
}

// What the hello's setup would otherwise do in a fresh QEMU, done once at boot instead.
void PrepareForHello() {
  g_boot_id_mounted = MountBootIdFile().ok();
  // systemd's id, read by some tools: made here so the hello only rewrites it in place.
  if (::access("/etc", W_OK) == 0) {
    ::unlink("/etc/machine-id");  // an image's own, the same in every box
    (void)base::WriteFile("/etc/machine-id", "uninitialized\n");
  }
  (void)PrepareExecCgroup();  // an error comes back at the hello, from SetUpExecCgroup
}

}  // namespace

Status ApplyGuestSetup(const protocol::msg::GuestSetup& setup) {
  RETURN_IF_ERROR(ReseedRandom(setup.entropy));
  struct timespec now = {static_cast<time_t>(setup.time_unix_ns / 1'000'000'000),
                         static_cast<long>(setup.time_unix_ns % 1'000'000'000)};
  if (::clock_settime(CLOCK_REALTIME, &now) != 0) return base::ErrnoStatus("set the clock");
  if (!g_boot_id_mounted) {
    RETURN_IF_ERROR(MountBootIdFile());
    g_boot_id_mounted = true;
  }
  // In place: the mount over boot_id holds this file's inode.
  RETURN_IF_ERROR(base::WriteFile(kBootIdFile, RandomUuid() + "\n"));
  std::string machine_id = RandomUuid();
  machine_id.erase(std::remove(machine_id.begin(), machine_id.end(), '-'), machine_id.end());
  if (::access("/etc", W_OK) == 0) {
    RETURN_IF_ERROR(base::WriteFile("/etc/machine-id", machine_id + "\n"));
  }
  // Seeds an init would feed back into the pool: the template's, the same in every clone.
  for (const char* seed : {"/var/lib/systemd/random-seed", "/var/lib/urandom/random-seed"}) {
    ::unlink(seed);
  }
  // Limits the host reports must hold: a box without them is not run.
  return SetUpExecCgroup(setup.max_processes, setup.memory_bytes).WithContext("exec limits");
}

StatusOr<base::UniqueFd> SetUpVmGuest() {
  auto fd = SetUp();
  if (!fd.ok()) {
    Status st = fd.status().WithContext("vm guest setup");
    Console(st.ToString());
    return st;
  }
  return fd;
}

void PowerOffVmGuest() {
  ::sync();
  ::reboot(RB_POWER_OFF);
  // Only reached if power-off failed: PID 1 exiting panics the kernel, and panic=-1 with
  // QEMU's -no-reboot ends the VM all the same.
  ::_exit(1);
}

}  // namespace codebox::agent
