/* The sizes the runtime supports. shmapc checks programs against them at compile time, with a
 * located error (docs/limits.md); the runtime checks them again at run time, for programs
 * linked against it by other means. Plain C: both the compiler and the runtime include it. */
#ifndef SHMAP_LIMITS_H
#define SHMAP_LIMITS_H

#define SHM_MAX_DEVICES 4096   /* devices in one mesh: one thread each */
#define SHM_MAX_MESH_AXES 8    /* axes of one mesh */
#define SHM_MAX_RANK 16        /* dimensions of one array */
/* Elements of one array (4 TiB of f32): far above any memory here, and low enough that byte
 * counts and index arithmetic on int64 never overflow. */
#define SHM_MAX_ELEMENTS (1LL << 40)

#endif
