/* suggest.c — "did you mean" for names a person typed: sections, keys, parameters, plugins and
 * resources.
 *
 * The distance is Levenshtein's, ignoring case, computed with one row of the usual table; names
 * longer than 63 characters are never suggested (nobody mistypes those into something close). */
#include "build_config.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "suggest.h"

#define SUGGEST_MAX_EDITS 2u
#define SUGGEST_MAX_NAME 63u

static unsigned edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > SUGGEST_MAX_NAME || lb > SUGGEST_MAX_NAME)
        return SUGGEST_MAX_NAME + 1;
    unsigned row[SUGGEST_MAX_NAME + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned up = row[j];
            unsigned cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            unsigned best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

void crmm_suggestion_start(crmm_suggestion *s, const char *typed)
{
    s->typed = typed ? typed : "";
    s->distance = SUGGEST_MAX_EDITS + 1;
    s->best[0] = '\0';
}

void crmm_suggestion_consider(crmm_suggestion *s, const char *candidate)
{
    if (!candidate || strlen(candidate) >= sizeof s->best)
        return;
    unsigned d = edit_distance(s->typed, candidate);
    if (d < s->distance) {
        s->distance = d;
        snprintf(s->best, sizeof s->best, "%s", candidate);
    }
}

const char *crmm_suggestion_best(const crmm_suggestion *s)
{
    return s->distance <= SUGGEST_MAX_EDITS ? s->best : NULL;
}
