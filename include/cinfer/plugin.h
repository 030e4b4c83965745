/* cinfer/plugin.h — the plugin descriptor: the one symbol every plugin exports.
 *
 * The loader reads abi_version and struct_size before anything else and calls no
 * plugin code unless both match; then it checks kind, name and the vtable's own
 * version. Vtables are append-only: a slot added later is "valid since vN" and the
 * core checks the vtable's version (and NULL) before calling it. */
#ifndef CINFER_PLUGIN_H
#define CINFER_PLUGIN_H

#include <stdint.h>

#include "cinfer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bump on any change to this struct or to any vtable layout below it. */
#define CINFER_PLUGIN_ABI_VERSION 1u

enum cinfer_plugin_kind {
    CINFER_PLUGIN_KIND_LAUNCHER = 1,  /* vtable: struct cinfer_launcher_ops */
    CINFER_PLUGIN_KIND_TOKENIZER = 2, /* vtable: struct cinfer_tokenizer_ops */
    CINFER_PLUGIN_KIND_BACKEND = 3,   /* vtable: struct cinfer_backend_ops (compute) */
};

struct cinfer_plugin_descriptor {
    uint32_t abi_version; /* CINFER_PLUGIN_ABI_VERSION the plugin was built with */
    uint32_t struct_size; /* sizeof(struct cinfer_plugin_descriptor) it was built with */
    uint32_t kind;        /* enum cinfer_plugin_kind */
    const char *name;     /* "tokenizer-bpe"; matches the file name */
    const char *version;  /* the plugin's own version, "1.0.0" */
    const void *vtable;   /* const struct cinfer_<kind>_ops * */
};

/* Name of the exported descriptor in a loadable module. */
#define CINFER_PLUGIN_DESCRIPTOR_SYMBOL "cinfer_plugin_descriptor"

/* Defines the descriptor. In a loadable module it is the exported symbol
 * cinfer_plugin_descriptor; when the plugin is linked into the binary
 * (CINFER_PLUGIN_STATIC_ID defined by the build) it gets a unique name that the
 * generated built-in table refers to. */
#define CINFER_PLUGIN_CONCAT_(a, b) a##b
#define CINFER_PLUGIN_CONCAT(a, b) CINFER_PLUGIN_CONCAT_(a, b)
#ifdef CINFER_PLUGIN_STATIC_ID
#define CINFER_PLUGIN_DESCRIPTOR_NAME \
    CINFER_PLUGIN_CONCAT(cinfer_plugin_descriptor_, CINFER_PLUGIN_STATIC_ID)
#else
#define CINFER_PLUGIN_DESCRIPTOR_NAME cinfer_plugin_descriptor
#endif
#define CINFER_PLUGIN_DEFINE(kind_, name_, version_, vtable_)                          \
    CINFER_API const struct cinfer_plugin_descriptor CINFER_PLUGIN_DESCRIPTOR_NAME = {  \
        CINFER_PLUGIN_ABI_VERSION, sizeof(struct cinfer_plugin_descriptor), (kind_),  \
        (name_), (version_), (vtable_)}

#ifdef __cplusplus
}
#endif
#endif
