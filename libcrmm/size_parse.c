/* size_parse.c — sizes as people write them in configs: "4096", "1.5GiB", "512 MB", "80%".
 *
 * Binary units (KiB..PiB) are powers of 1024, decimal ones (KB..PB) powers of 1000. A
 * fractional number is allowed with a unit ("1.5GiB"); the result is rounded down to a byte.
 * Anything that would not fit in 64 bits is an error, never a wrap-around. */
#include "build_config.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <crmm/config.h>
#include <crmm/error.h>

static const struct { const char *name; double mult; } size_units[] = {
    {"", 1.0}, {"B", 1.0},
    {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"PiB", 1125899906842624.0},
    {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15},
};

__extension__ typedef unsigned __int128 u128;

/* floor(n * 0.DIGITS) exactly, for the decimal digits [first, end) after a '.', however many:
 * from the last digit to the first, q = (digit * n + q) / 10. Dropping each step's fraction loses
 * nothing, as floor((N + f) / 10) = floor(N / 10) for an integer N and 0 <= f < 1; q stays at
 * most n, so digit * n + q fits in 128 bits. */
static uint64_t floor_times_digits(uint64_t n, const char *first, const char *end)
{
    u128 q = 0;
    for (const char *d = end; d-- > first;)
        q = ((u128)(unsigned)(*d - '0') * n + q) / 10;
    return (uint64_t)q;
}

crmm_status crmm_parse_size(const char *text, uint64_t percent_of, uint64_t *out, double *percent)
{
    if (!text || !out)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "size: NULL argument");
    const char *s = text;
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '-')
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "size '%s' is negative", text);
    if (!isdigit((unsigned char)*s) && *s != '.')
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "'%s' is not a size (e.g. 4096, 512MiB, 1.5GiB, 80%%)", text);
    /* the integer part exactly (so that sizes near 2^64 are not rounded through a double), then
     * the digits after a '.' (digits only: no exponent, no second dot) */
    const char *end = s;
    uint64_t whole = 0;
    for (; isdigit((unsigned char)*end); end++) {
        unsigned digit = (unsigned)(*end - '0');
        if (whole > (UINT64_MAX - digit) / 10)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "size '%s' does not fit in 64 bits", text);
        whole = whole * 10 + digit;
    }
    double frac = 0.0;
    bool has_frac = false;
    /* the fraction's digits, which the byte counts below use exactly, every one of them */
    const char *frac_first = end, *frac_end = end;
    bool frac_nonzero = false;
    if (*end == '.') {
        const char *first = ++end;
        while (isdigit((unsigned char)*end))
            end++;
        if (end == first)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "'%s' is not a size: no digit after '.'", text);
        for (const char *d = end; d-- > first;) /* last digit first; no strtod: no locale */
            frac = (frac + (double)(*d - '0')) / 10.0;
        for (const char *d = first; d < end; d++)
            frac_nonzero |= *d != '0';
        frac_first = first;
        frac_end = end;
        has_frac = true;
    }
    while (isspace((unsigned char)*end))
        end++;
    /* the unit: the whole word after the number (a longer one than any unit is named whole) */
    char unit[8];
    size_t ul = 0;
    while (end[ul] && !isspace((unsigned char)end[ul]))
        ul++;
    if (ul >= sizeof unit)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                              "'%s': unknown size unit '%.*s' (B KiB MiB GiB TiB PiB KB MB GB TB PB or %%)", text,
                              (int)(ul < 40 ? ul : 40), end);
    memcpy(unit, end, ul);
    unit[ul] = '\0';
    const char *tail = end + ul;
    while (isspace((unsigned char)*tail))
        tail++;
    if (*tail)
        return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "'%s' is not a size: unexpected '%s'", text, tail);

    if (strcmp(unit, "%") == 0) {
        double pct = (double)whole + frac; /* 0 for a share too small for a double: refused too */
        if (pct <= 0.0 || whole > 100 || (whole == 100 && frac_nonzero))
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "'%s': a percentage must be in (0, 100]", text);
        if (!percent && !percent_of)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "'%s': a percentage is not allowed here", text);
        if (percent)
            *percent = pct;
        /* floor(percent_of * (whole + fraction) / 100) = floor((percent_of * whole + floor(percent_of
         * * fraction)) / 100): the first product is whole, so the floor inside takes nothing away */
        *out = (uint64_t)(((u128)percent_of * whole + floor_times_digits(percent_of, frac_first, frac_end)) / 100);
        return CRMM_OK;
    }
    for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++) {
        if (strcasecmp(unit, size_units[i].name) != 0)
            continue;
        double mult = size_units[i].mult;
        if (percent)
            *percent = 0.0;
        if (mult == 1.0) {
            if (has_frac && frac_nonzero)
                return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "'%s': a byte count must be whole", text);
            *out = whole;
            return CRMM_OK;
        }
        uint64_t m = (uint64_t)mult;
        if (whole > UINT64_MAX / m)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "size '%s' does not fit in 64 bits", text);
        uint64_t v = (uint64_t)whole * m;
        /* the fraction's bytes, exactly and rounded down */
        uint64_t f = floor_times_digits(m, frac_first, frac_end);
        if (v > UINT64_MAX - f)
            return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT, "size '%s' does not fit in 64 bits", text);
        *out = v + f;
        return CRMM_OK;
    }
    return crmm_set_error(CRMM_ERROR_INVALID_ARGUMENT,
                          "'%s': unknown size unit '%s' (B KiB MiB GiB TiB PiB KB MB GB TB PB or %%)", text, unit);
}
