/* plugin_descriptor.h — the descriptor and entry point of a plugin of this tree, written once.
 *
 * Every plugin built here is versioned with the package and exports its descriptor through
 * crmm_plugin_entry (crmm/plugin.h). PLUGIN_DESCRIPTOR takes the fields that differ from plugin
 * to plugin as designated initializers (.name, .description, .upstream, .create, and .params,
 * .config_size, .validate, .flags where it has them) and writes the ABI header, the version and
 * the entry function. plugins/template spells all of this out instead: it is the plugin to copy,
 * built against the installed headers alone. */
#ifndef CRMM_PLUGINS_PLUGIN_DESCRIPTOR_H
#define CRMM_PLUGINS_PLUGIN_DESCRIPTOR_H

#include <crmm/plugin.h>

#define PLUGIN_DESCRIPTOR(...) \
    static const crmm_plugin plugin_descriptor = {CRMM_PLUGIN_HEADER, .version = PACKAGE_VERSION, __VA_ARGS__}; \
    CRMM_PLUGIN_DEFINE(plugin_descriptor)

#endif
