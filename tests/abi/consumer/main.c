/* Links metile::metile from an installed tree; checks the library against its header. */
#include <metile/metile.h>

#include <stdio.h>

int main(void) {
  char *devices = NULL;
  if (metile_version() != METILE_VERSION_NUMBER) {
    fprintf(stderr, "library %u, header %d\n", (unsigned)metile_version(), METILE_VERSION_NUMBER);
    return 1;
  }
  if (metile_devices_available(&devices) != METILE_OK) {
    fprintf(stderr, "metile_devices_available: %s\n", metile_last_error());
    return 1;
  }
  printf("consumer: metile %s, devices: %s\n", metile_version_string(), devices);
  metile_free(devices);
  return 0;
}
