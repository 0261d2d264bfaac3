/* The wire fuzzers without libFuzzer: sends every file named on the command
 * line (directories are read, entries in name order) through the fuzz
 * target once, then stops the server in order so that LeakSanitizer checks
 * everything the inputs allocated. Exits 0 when every input went through
 * and the server shut down cleanly. This is how ctest replays the corpora
 * under the gcc sanitizer build. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "wire.h"

/* Reads a whole file (caller frees *data). Returns 0, or -1 with a message. */
static int slurp(const char *path, uint8_t **data, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  uint8_t *buf = NULL;
  size_t len = 0, cap = 0;
  int bad = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 4096;
      uint8_t *grown = realloc(buf, cap);
      if (grown == NULL) {
        bad = 1;
        break;
      }
      buf = grown;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  if (ferror(f)) bad = 1;
  fclose(f);
  if (bad) {
    fprintf(stderr, "%s: cannot read\n", path);
    free(buf);
    return -1;
  }
  *data = buf;
  *size = len;
  return 0;
}

static int run_file(const char *path) {
  uint8_t *data = NULL;
  size_t size = 0;
  if (slurp(path, &data, &size) != 0) return -1;
  LLVMFuzzerTestOneInput(data, size);
  free(data);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

/* Runs one file, or every regular file of a directory. Returns the count
 * run, or -1. */
static long run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) return run_file(path) == 0 ? 1 : -1;
  struct dirent **names = NULL;
  int n = scandir(path, &names, NULL, by_name);
  if (n < 0) {
    perror(path);
    return -1;
  }
  long count = 0;
  for (int i = 0; i < n; i++) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", path, names[i]->d_name);
    struct stat fs;
    if (names[i]->d_name[0] != '.' && stat(full, &fs) == 0 && S_ISREG(fs.st_mode)) {
      if (run_file(full) != 0)
        count = -1;
      else if (count >= 0)
        count++;
    }
    free(names[i]);
  }
  free(names);
  return count;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  nrd_fuzz_server_start();
  long total = 0;
  int failed = 0;
  for (int i = 1; i < argc; i++) {
    long n = run_path(argv[i]);
    if (n < 0)
      failed = 1;
    else
      total += n;
  }
  int status = nrd_fuzz_server_stop();
  printf("replayed %ld inputs; server exit status %d\n", total, status);
  return failed || status != 0 ? 1 : 0;
}
