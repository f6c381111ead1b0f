/* paramtest_plugin.h — what the test-only `paramtest` plugin reports about the parameters it got.
 *
 * The plugin declares one parameter of every type (a required one among them) and, at create,
 * reads each with the typed getters and keeps what it read. Tests fetch that record with
 * crmm_resource_control(mr, PARAMTEST_CONTROL_VALUES, &values) to check that values given in a
 * config or a "k=v" string arrive validated, typed and defaulted as the plugin ABI promises. */
#ifndef CRMM_TESTS_PARAMTEST_PLUGIN_H
#define CRMM_TESTS_PARAMTEST_PLUGIN_H

#include <stdbool.h>
#include <stdint.h>
#include <crmm/error.h>

/* control op (third-party range): arg is a paramtest_values * to fill in */
#define PARAMTEST_CONTROL_VALUES 1

/* One parameter as the plugin read it: the getter's status, the value, crmm_params_is_set. */
typedef struct paramtest_values {
    crmm_status st_count, st_limit, st_enabled, st_label, st_mode, st_ratio, st_id;
    uint64_t count;      /* uint, default 7 */
    uint64_t limit;      /* size, default 1MiB; a percentage resolves against the device */
    bool enabled;        /* bool, default false */
    char label[64];      /* string, no default */
    char mode[16];       /* enum fast|safe|debug, default safe */
    double ratio;        /* double, default 0.5 */
    uint64_t id;         /* uint, required */
    bool set_count, set_limit, set_enabled, set_label, set_mode, set_ratio, set_id;
    crmm_status st_mode_index; /* crmm_params_get_enum(params, "mode") */
    int mode_index;      /* the index of mode among fast|safe|debug */
    crmm_status st_label_index; /* crmm_params_get_enum(params, "label"): not an enum */
    uint64_t given;      /* crmm_params_given: bit i for row i (count, limit, enabled, label, mode, ratio, id) */
    crmm_status st_wrong_type; /* crmm_params_get_uint(params, "ratio") */
    crmm_status st_unknown_key; /* crmm_params_get_uint(params, "nope") */
    char name[48];       /* crmm_params_resource_name */
    int device;          /* crmm_params_device */
} paramtest_values;

#endif
