/* fuzz_size.c — libFuzzer target: size strings (crmm_parse_size). The first 8 bytes are the size
 * a percentage is taken of, the rest the text. Besides not crashing: a percentage is never more
 * than what it is taken of, and a size that parses is the same when parsed again. */
#include "build_config.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <crmm/config.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t of = 0;
    if (size >= 8) {
        memcpy(&of, data, 8);
        data += 8;
        size -= 8;
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    uint64_t v = 0, again = 0;
    double pct = -1.0;
    if (crmm_parse_size(text, of, &v, &pct) == CRMM_OK) {
        if (pct > 0.0 && v > of)
            abort(); /* more than 100% */
        if (crmm_parse_size(text, of, &again, NULL) == CRMM_OK && again != v)
            abort(); /* not a function of its input */
    }
    free(text);
    return 0;
}
