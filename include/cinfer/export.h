/* cinfer/export.h — symbol visibility. The core builds with -fvisibility=hidden and
 * exports only what embedders and plugins use. */
#ifndef CINFER_EXPORT_H
#define CINFER_EXPORT_H

#define CINFER_API __attribute__((visibility("default")))

#endif
