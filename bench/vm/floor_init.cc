// The floor's /init: the least a guest can do. Prints one line on the console and powers off.
#include <fcntl.h>
#include <sys/reboot.h>
#include <unistd.h>

int main() {
  static const char kLine[] = "CODEBOX-FLOOR-READY\n";
  int fd = ::open("/dev/console", O_WRONLY);
  if (fd >= 0) (void)!::write(fd, kLine, sizeof kLine - 1);
  ::sync();
  ::reboot(RB_POWER_OFF);
  return 0;
}
