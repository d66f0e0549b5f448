/* SPDX-License-Identifier: GPL-2.0-only */
/* A Node-API addon for tests/test-v8-stacks.py, built by the test with gcc alone against Debian's
 * libnode-dev headers (tests/lib/debiannode.py): JavaScript calls callBack(fn, arg), which calls
 * fn(arg) back through napi_call_function, so that a sample in fn shows JavaScript -> C ->
 * JavaScript. Node-API is a stable ABI: the same file loads in node 18, 20 and 24. */
#include <node_api.h>

/* Exported and never inlined: the test finds it by this ELF symbol between the two JavaScript
 * frames. */
__attribute__((noinline, visibility("default"))) napi_value profd_addon_call_back(napi_env env,
                                                                                  napi_callback_info info)
{
        size_t argc = 2;
        napi_value argv[2], global, result;

        if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2)
                return NULL;
        if (napi_get_global(env, &global) != napi_ok)
                return NULL;
        if (napi_call_function(env, global, argv[0], 1, &argv[1], &result) != napi_ok)
                return NULL;
        return result;
}

NAPI_MODULE_INIT()
{
        napi_value fn;

        if (napi_create_function(env, "callBack", NAPI_AUTO_LENGTH, profd_addon_call_back, NULL, &fn) !=
                    napi_ok ||
            napi_set_named_property(env, exports, "callBack", fn) != napi_ok)
                return NULL;
        return exports;
}
