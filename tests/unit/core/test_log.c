/* Unit tests for log.c: levels, line format, file output, settings JSON. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "log.h"

static char path[64];

static void setup(void) {
  snprintf(path, sizeof(path), "/tmp/nrd_test_log_%d.txt", (int)getpid());
  unlink(path);
  nrd_log_reset();
  cr_assert_eq(nrd_log_set_file(path), 0);
}

static void teardown(void) {
  nrd_log_reset();
  unlink(path);
}

/* Reads the whole log file (caller frees). */
static char *slurp(void) {
  FILE *fp = fopen(path, "r");
  cr_assert_not_null(fp);
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
  buf[n] = '\0';
  fclose(fp);
  return strdup(buf);
}

TestSuite(log, .init = setup, .fini = teardown);

Test(log, defaults) {
  cr_assert(nrd_log_enabled(TRITONSERVER_LOG_INFO));
  cr_assert(nrd_log_enabled(TRITONSERVER_LOG_WARN));
  cr_assert(nrd_log_enabled(TRITONSERVER_LOG_ERROR));
  cr_assert_not(nrd_log_enabled(TRITONSERVER_LOG_VERBOSE));
  cr_assert_eq(nrd_log_verbose_level(), 0);
  cr_assert_eq(nrd_log_format(), TRITONSERVER_LOG_DEFAULT);
}

Test(log, default_format_line) {
  nrd_log(TRITONSERVER_LOG_INFO, "/some/dir/server.c", 42, "hello %d", 7);
  char *text = slurp();
  /* I1122 04:16:12.123456 1234 server.c:42] "hello 7" */
  char letter;
  unsigned mm, dd, hh, mi, ss, us, pid;
  char rest[256];
  int n = sscanf(text, "%c%2u%2u %2u:%2u:%2u.%6u %u %255[^\n]", &letter, &mm, &dd, &hh, &mi, &ss, &us, &pid, rest);
  cr_assert_eq(n, 9, "unexpected line: %s", text);
  cr_assert_eq(letter, 'I');
  cr_assert(mm >= 1 && mm <= 12 && dd >= 1 && dd <= 31 && hh < 24 && mi < 60 && ss < 61);
  cr_assert_eq(pid, (unsigned)getpid());
  cr_assert_str_eq(rest, "server.c:42] \"hello 7\"");
  /* fixed widths: "I" + MMDD + space + hh:mm:ss.uuuuuu */
  cr_assert_eq(text[5], ' ');
  cr_assert_eq(text[14], '.');
  cr_assert_eq(text[21], ' ');
  cr_assert_eq(text[strlen(text) - 1], '\n');
  free(text);
}

Test(log, iso8601_format_line) {
  nrd_log_set_format(TRITONSERVER_LOG_ISO8601);
  nrd_log(TRITONSERVER_LOG_WARN, "x.c", 3, "careful");
  char *text = slurp();
  unsigned y, mo, d, h, mi, s, pid;
  char letter;
  char rest[128];
  int n = sscanf(text, "%4u-%2u-%2uT%2u:%2u:%2uZ %c %u %127[^\n]", &y, &mo, &d, &h, &mi, &s, &letter, &pid, rest);
  cr_assert_eq(n, 9, "unexpected line: %s", text);
  cr_assert(y >= 2024);
  cr_assert_eq(letter, 'W');
  cr_assert_str_eq(rest, "x.c:3] \"careful\"");
  free(text);
}

Test(log, severity_letters_and_disabled_levels) {
  nrd_log(TRITONSERVER_LOG_ERROR, "a.c", 1, "e");
  nrd_log_set_warn(false);
  nrd_log(TRITONSERVER_LOG_WARN, "a.c", 2, "hidden");
  NRD_LOG_WARN("also hidden %d", 1);
  nrd_log_set_info(false);
  NRD_LOG_INFO("hidden too");
  NRD_LOG_ERROR("shown %s", "yes");
  char *text = slurp();
  cr_assert_eq(text[0], 'E');
  cr_assert_null(strstr(text, "hidden"));
  cr_assert_not_null(strstr(text, "] \"shown yes\"\n"));
  free(text);
  cr_assert_not(TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_INFO));
  cr_assert(TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_ERROR));
}

Test(log, verbose_levels) {
  NRD_LOG_VERBOSE(1, "v1 off");
  nrd_log_set_verbose(2);
  cr_assert(nrd_log_enabled(TRITONSERVER_LOG_VERBOSE));
  NRD_LOG_VERBOSE(1, "v1 on");
  NRD_LOG_VERBOSE(2, "v2 on");
  NRD_LOG_VERBOSE(3, "v3 off");
  nrd_log_set_verbose(-5);
  cr_assert_eq(nrd_log_verbose_level(), 0);
  char *text = slurp();
  cr_assert_null(strstr(text, "off"));
  cr_assert_not_null(strstr(text, "v1 on"));
  cr_assert_not_null(strstr(text, "v2 on"));
  cr_assert_eq(text[0], 'I'); /* verbose lines print as info */
  free(text);
}

Test(log, macros_do_not_evaluate_arguments_when_off) {
  int calls = 0;
  nrd_log_set_info(false);
  NRD_LOG_INFO("%d", ++calls);
  NRD_LOG_VERBOSE(1, "%d", ++calls);
  cr_assert_eq(calls, 0);
}

Test(log, public_log_message) {
  cr_assert_null(TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, "backend.cc", 10, "from backend"));
  cr_assert_null(TRITONSERVER_LogMessage(TRITONSERVER_LOG_VERBOSE, "backend.cc", 11, "no verbose"));
  cr_assert_null(TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, NULL, 0, "no file"));
  TRITONSERVER_Error *err = TRITONSERVER_LogMessage(TRITONSERVER_LOG_INFO, "f", 1, NULL);
  cr_assert_eq(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(err);
  err = TRITONSERVER_LogMessage((TRITONSERVER_LogLevel)99, "f", 1, "x");
  cr_assert_eq(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(err);
  char *text = slurp();
  cr_assert_not_null(strstr(text, " backend.cc:10] \"from backend\"\n"));
  cr_assert_null(strstr(text, "no verbose"));
  cr_assert_not_null(strstr(text, " ?:0] \"no file\"\n"));
  free(text);
}

Test(log, long_message_written_whole) {
  char big[3000];
  memset(big, 'z', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  nrd_log(TRITONSERVER_LOG_INFO, "a.c", 1, "%s|end", big);
  char *text = slurp();
  cr_assert_not_null(strstr(text, "z|end\"\n"));
  cr_assert_eq(strlen(strstr(text, "] ") + 2), sizeof(big) - 1 + 7); /* quotes */
  free(text);
}

Test(log, bad_file_keeps_previous_destination) {
  cr_assert_neq(nrd_log_set_file("/nonexistent-dir/x/y.log"), 0);
  nrd_log(TRITONSERVER_LOG_INFO, "a.c", 1, "still here");
  char *text = slurp();
  cr_assert_not_null(strstr(text, "still here"));
  free(text);
  char cur[128];
  nrd_log_file(cur, sizeof(cur));
  cr_assert_str_eq(cur, path);
}

Test(log, settings_json) {
  nrd_log_set_verbose(3);
  nrd_log_set_warn(false);
  nrd_log_set_format(TRITONSERVER_LOG_ISO8601);
  json_t *j = nrd_log_settings_json();
  cr_assert_not_null(j);
  cr_assert_str_eq(json_string_value(json_object_get(j, "log_file")), path);
  cr_assert(json_is_true(json_object_get(j, "log_info")));
  cr_assert(json_is_false(json_object_get(j, "log_warning")));
  cr_assert(json_is_true(json_object_get(j, "log_error")));
  cr_assert_eq(json_integer_value(json_object_get(j, "log_verbose_level")), 3);
  cr_assert_str_eq(json_string_value(json_object_get(j, "log_format")), "ISO8601");
  json_decref(j);
  nrd_log_reset();
  j = nrd_log_settings_json();
  cr_assert_str_eq(json_string_value(json_object_get(j, "log_file")), "");
  cr_assert_str_eq(json_string_value(json_object_get(j, "log_format")), "default");
  json_decref(j);
}

static void *spam(void *arg) {
  for (int i = 0; i < 200; i++) nrd_log(TRITONSERVER_LOG_INFO, "t.c", i, "thread %ld line %d", (long)(intptr_t)arg, i);
  return NULL;
}

Test(log, concurrent_lines_do_not_interleave) {
  pthread_t th[4];
  for (long i = 0; i < 4; i++) pthread_create(&th[i], NULL, spam, (void *)(intptr_t)i);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  FILE *fp = fopen(path, "r");
  char line[256];
  int lines = 0;
  while (fgets(line, sizeof(line), fp) != NULL) {
    long t;
    int l;
    char *p = strstr(line, "] \"thread ");
    cr_assert_not_null(p, "bad line: %s", line);
    cr_assert_eq(sscanf(p, "] \"thread %ld line %d\"\n", &t, &l), 2);
    cr_assert_eq(line[0], 'I');
    lines++;
  }
  fclose(fp);
  cr_assert_eq(lines, 800);
}

/* Messages are JSON strings, as Triton writes them: quotes, backslashes
 * and control characters escaped, other bytes (UTF-8 included) kept. */
Test(log, messages_are_json_escaped) {
  nrd_log(TRITONSERVER_LOG_INFO, "a.c", 1, "say \"hi\"\\ now\nnext\tend\x01 caf\xc3\xa9");
  char *text = slurp();
  cr_assert_not_null(strstr(text, "a.c:1] \"say \\\"hi\\\"\\\\ now\\nnext\\tend\\u0001 caf\xc3\xa9\"\n"), "%s", text);
  free(text);
}

/* TRITON_SERVER_ESCAPE_LOG_MESSAGES=0 writes messages as they are. */
Test(log, escaping_off_by_environment) {
  setenv("TRITON_SERVER_ESCAPE_LOG_MESSAGES", "0", 1);
  nrd_log_reset();
  cr_assert_eq(nrd_log_set_file(path), 0);
  nrd_log(TRITONSERVER_LOG_INFO, "a.c", 1, "say \"hi\"");
  unsetenv("TRITON_SERVER_ESCAPE_LOG_MESSAGES");
  char *text = slurp();
  cr_assert_not_null(strstr(text, "a.c:1] say \"hi\"\n"), "%s", text);
  free(text);
}
