/* libFuzzer target: the program cache's entry reader, clattn__bincache_parse, on any bytes, as a
 * planted or damaged file under <cache>/programs would give them. libFuzzer's buffer is exactly
 * the input's size, so ASan catches a read past the file. Each input is parsed twice: with the
 * key its own header names (so a valid entry, like the seeds written by the real writer, is
 * accepted and the fuzzer reaches the length and checksum checks), and with a key it does not
 * hold. Checked: an accepted binary is non-empty, lies inside the file, ends where the file ends
 * (the format has nothing after it) and matches its checksum; another key is never accepted. */
#include "fuzz_input.h"
#include "tune.h"

#define HEAD_BYTES 16 /* magic, format, key length (bincache.c) */
#define TAIL_BYTES 16 /* binary length and checksum after the key */

static void check_accepted(const uint8_t *file, size_t size, const unsigned char *bin,
                           size_t bin_len, const char *key) {
  FUZZ_CHECK(bin_len > 0, "an empty binary was accepted");
  FUZZ_CHECK(bin >= file + HEAD_BYTES + strlen(key) + TAIL_BYTES && bin <= file + size,
             "the binary starts outside the file");
  FUZZ_CHECK(bin_len == (size_t)(file + size - bin), "the binary (%zu bytes) does not end the file",
             bin_len);
  uint64_t sum;
  memcpy(&sum, bin - 8, sizeof sum);
  FUZZ_CHECK(clattn__hash(bin, bin_len, 0) == sum, "the checksum does not match");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The key the header names: its length at bytes 12..15, its text after them; cut at a NUL,
   * as a C string is. */
  char key[512] = "";
  uint32_t keylen = 0;
  if (size >= HEAD_BYTES) {
    memcpy(&keylen, data + 12, sizeof keylen);
    if (keylen < sizeof key && keylen <= size - HEAD_BYTES) {
      memcpy(key, data + HEAD_BYTES, keylen);
      key[keylen] = 0;
    }
  }
  size_t bin_len = 0;
  const unsigned char *bin = clattn__bincache_parse(data, size, key, &bin_len);
  if (bin) check_accepted(data, size, bin, bin_len, key);

  /* The same key with its last character changed (or a key of one character): another entry. */
  char other[sizeof key + 1];
  size_t n = strlen(key);
  memcpy(other, key, n + 1);
  if (n) {
    other[n - 1] = other[n - 1] == 'x' ? 'y' : 'x';
  } else {
    other[0] = 'x', other[1] = 0;
  }
  bin_len = 0;
  bin = clattn__bincache_parse(data, size, other, &bin_len);
  FUZZ_CHECK(bin == NULL, "an entry for another key was accepted");

  /* No file at all is no entry. */
  FUZZ_CHECK(clattn__bincache_parse(NULL, 0, key, &bin_len) == NULL, "NULL was accepted");
  return 0;
}
