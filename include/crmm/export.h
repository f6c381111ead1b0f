/* crmm/export.h — CRMM_API marks the functions libcrmm exports. libcrmm is built with
 * -fvisibility=hidden, so a function without it stays inside the library; every public header
 * puts it in front of each declaration. */
#ifndef CRMM_EXPORT_H
#define CRMM_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define CRMM_API __attribute__((visibility("default")))
#else
#define CRMM_API
#endif

#endif
