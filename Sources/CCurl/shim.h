#ifndef COUNTERSIGN_CCURL_SHIM_H
#define COUNTERSIGN_CCURL_SHIM_H

// libcurl's option and info setters are C variadic functions, which Swift
// cannot call: these typed wrappers are the whole bridge.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

typedef size_t (*countersign_curl_write_callback)(char *buffer, size_t size, size_t count, void *userdata);

static inline CURLcode countersign_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode countersign_curl_set_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode countersign_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode countersign_curl_set_list(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode countersign_curl_set_mime(CURL *handle, curl_mime *mime) {
    return curl_easy_setopt(handle, CURLOPT_MIMEPOST, mime);
}

static inline CURLcode countersign_curl_set_header_callback(CURL *handle, countersign_curl_write_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

static inline CURLcode countersign_curl_get_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

#endif
