/* SPDX-License-Identifier: GPL-2.0-only */
/* Demangling of C++ (Itanium ABI) and Rust legacy symbol names. */
#pragma once

/* The demangled form of mangled, malloc'd; NULL when it is not an Itanium-mangled name ("_Z...")
 * or cannot be demangled. Rust legacy names lose their escapes and "::h<hash>". */
char *demangle_symbol(const char *mangled);
