/* suggest.h — "did you mean": the known name closest to a mistyped one. */
#ifndef CRMM_CORE_SUGGEST_H
#define CRMM_CORE_SUGGEST_H

/* A running search for the candidate closest to `typed`: start it, offer each candidate, then
 * ask for the best. Only candidates within two edits (insert, delete or change one character,
 * ignoring case) count; ties go to the first one offered. */
typedef struct crmm_suggestion {
    const char *typed;
    unsigned distance;    /* edits from `typed` to `best`; 3 or more: no candidate yet */
    char best[72];
} crmm_suggestion;

void crmm_suggestion_start(crmm_suggestion *s, const char *typed);
void crmm_suggestion_consider(crmm_suggestion *s, const char *candidate);
/* The closest candidate offered, or NULL when none was within two edits. */
const char *crmm_suggestion_best(const crmm_suggestion *s);

#endif
