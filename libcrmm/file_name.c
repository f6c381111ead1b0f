/* file_name.c — file names from patterns that plugins take as parameters: "crmm.dev%d.%p.csv".
 *
 * One pass over the pattern appends each plain character, or the text of a % sequence, to the
 * caller's buffer; nothing is written past `size` and a name that does not fit is an error,
 * never a silently shortened name. */
#include "build_config.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <crmm/plugin.h>

crmm_status crmm_expand_file_name(const char *pattern, int device, char *out, size_t size)
{
    if (!pattern || !out || size == 0)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "file name: NULL pattern or no room for the name");
    size_t n = 0;
    for (const char *c = pattern; *c; c++) {
        char piece[32];
        const char *add = piece;
        if (*c != '%') {
            piece[0] = *c;
            piece[1] = '\0';
        } else if (c[1] == 'd') {
            if (device >= 0)
                snprintf(piece, sizeof piece, "%d", device);
            else
                add = "host";
            c++;
        } else if (c[1] == 'p') {
            snprintf(piece, sizeof piece, "%ld", (long)getpid());
            c++;
        } else if (c[1] == '%') {
            add = "%";
            c++;
        } else {
            return crmm_set_error(CRMM_ERROR_CONFIG, "file name '%s': unknown '%%%.1s' (use %%d for the device, "
                                  "%%p for the process id, %%%% for %%)", pattern, c + 1);
        }
        size_t len = strlen(add);
        if (len >= size - n)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "file name '%s' is longer than %zu bytes when expanded",
                                  pattern, size - 1);
        memcpy(out + n, add, len);
        n += len;
    }
    out[n] = '\0';
    return CRMM_OK;
}
