/*
 * pam_countersign: a second factor for PAM (sshd, sudo, ...) approved on the
 * user's phone through a Countersign daemon.
 *
 * It runs inside sshd's and sudo's address space, as root, and every answer
 * it reads comes from a network: HTTP and TLS are libcurl's, JSON is
 * json-c's, every body is read into a buffer with a hard bound, and every
 * value taken from an answer is checked for type, length and characters
 * before it is used. See docs/pam.md for the configuration and the choices.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>
#include <openssl/evp.h>

#define PAM_SM_AUTH
#include <security/pam_ext.h>
#include <security/pam_modules.h>

#define EXPORT __attribute__((visibility("default")))

#define DEFAULT_CONF "/etc/countersign/pam.conf"
#define MAX_FILE_BYTES (64 * 1024)
#define MAX_KEY_BYTES 512
#define MAX_ANSWER_BYTES (64 * 1024)
#define MAX_JSON_DEPTH 8
#define LONG_POLL_SECONDS 25
#define CONNECT_SECONDS 5
#define CODE_TRIES 3

struct conf {
    char url[1024];
    char key_file[PATH_MAX];
    char ca_file[PATH_MAX];
    char user_map[256];
    char groups[1024];
    int failmode_safe;
    int timeout;
    int codes;
    int unknown_ignore;
};

/* A signal that asks the login to stop (Ctrl-C, sshd ending its PAM child). */
static volatile sig_atomic_t caught_signal;

static void on_signal(int signo) { caught_signal = signo; }

#define WATCHED 3
struct signals {
    struct sigaction old[WATCHED];
    int installed;
};

static const int watched[WATCHED] = {SIGINT, SIGTERM, SIGHUP};

/* The process's thread count (/proc/self/status), or 0 when it cannot be read. */
static int thread_count(void) {
    FILE *status = fopen("/proc/self/status", "re");
    if (status == NULL) return 0;
    char line[256];
    int threads = 0;
    while (fgets(line, sizeof line, status) != NULL) {
        if (strncmp(line, "Threads:", 8) == 0) {
            threads = atoi(line + 8);
            break;
        }
    }
    fclose(status);
    return threads;
}

/* Handlers are process-wide: they are installed only in a single-threaded
 * process (sshd's PAM child, sudo, login), where no other login can share
 * them, and always restored before the module returns. */
static void watch_signals(struct signals *s) {
    s->installed = 0;
    caught_signal = 0;
    if (thread_count() != 1) return;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < WATCHED; i++) sigaction(watched[i], &action, &s->old[i]);
    s->installed = 1;
}

static void restore_signals(struct signals *s) {
    if (!s->installed) return;
    for (int i = 0; i < WATCHED; i++) sigaction(watched[i], &s->old[i], NULL);
    s->installed = 0;
}

/* While the conversation prompts, the program's own handlers are in place:
 * sshd ends a PAM child whose client left with SIGTERM and then waits for it,
 * and a handler of ours that only notes the signal would leave the child
 * blocked in the conversation (sshd retries its read), both waiting for ever. */
static void pause_signals(struct signals *s, struct sigaction *ours) {
    if (!s->installed) return;
    for (int i = 0; i < WATCHED; i++) sigaction(watched[i], &s->old[i], &ours[i]);
}

static void resume_signals(struct signals *s, const struct sigaction *ours) {
    if (!s->installed) return;
    for (int i = 0; i < WATCHED; i++) sigaction(watched[i], &ours[i], NULL);
}

/* ---- small text helpers ---- */

static void trim(char *text) {
    size_t len = strlen(text);
    while (len > 0 && isspace((unsigned char)text[len - 1])) text[--len] = '\0';
    size_t start = 0;
    while (text[start] != '\0' && isspace((unsigned char)text[start])) start++;
    if (start > 0) memmove(text, text + start, len - start + 1);
}

/* Printable ASCII only, at most `size - 1` bytes: what a log line or the phone may show of a name. */
static void printable(char *out, size_t size, const char *in) {
    size_t n = 0;
    if (in == NULL) in = "";
    for (; *in != '\0' && n + 1 < size; in++) {
        unsigned char c = (unsigned char)*in;
        out[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    out[n] = '\0';
}

/* A value for a `name=value` log field: printable ASCII without spaces, quotes,
 * `=` or backslashes, so that a chosen login name cannot forge another field. */
static void log_field(char *out, size_t size, const char *in) {
    printable(out, size, in);
    for (char *p = out; *p != '\0'; p++) {
        if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\') *p = '?';
    }
}

static int copy(char *out, size_t size, const char *in) {
    size_t len = strlen(in);
    if (len >= size) return -1;
    memcpy(out, in, len + 1);
    return 0;
}

/* ---- configuration ---- */

/* Reads a file that only root may read or write: owned by root, no access for group or others. */
static int read_private_file(pam_handle_t *pamh, const char *path, const char *what, char *out, size_t size) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        pam_syslog(pamh, LOG_ERR, "cannot open %s %s: %s", what, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pam_syslog(pamh, LOG_ERR, "refusing %s %s: not a regular file", what, path);
        close(fd);
        return -1;
    }
    if (st.st_uid != 0 || (st.st_mode & 077) != 0) {
        pam_syslog(pamh, LOG_ERR, "refusing %s %s: it must be owned by root and not readable or writable by group or others (chmod 600)",
                   what, path);
        close(fd);
        return -1;
    }
    if ((size_t)st.st_size >= size) {
        pam_syslog(pamh, LOG_ERR, "refusing %s %s: larger than %zu bytes", what, path, size - 1);
        close(fd);
        return -1;
    }
    size_t total = 0;
    while (total + 1 < size) {
        ssize_t got = read(fd, out + total, size - 1 - total);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            pam_syslog(pamh, LOG_ERR, "cannot read %s %s: %s", what, path, strerror(errno));
            close(fd);
            return -1;
        }
        if (got == 0) break;
        total += (size_t)got;
    }
    close(fd);
    out[total] = '\0';
    if (memchr(out, '\0', total) != NULL) {
        pam_syslog(pamh, LOG_ERR, "refusing %s %s: it holds a NUL byte", what, path);
        return -1;
    }
    return 0;
}

/* A file others may read but only root may change (the CA the module trusts). */
static int root_owned_file(pam_handle_t *pamh, const char *path, const char *what) {
    struct stat st;
    if (stat(path, &st) != 0) {
        pam_syslog(pamh, LOG_ERR, "cannot use %s %s: %s", what, path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0) {
        pam_syslog(pamh, LOG_ERR, "refusing %s %s: it must be a file owned by root and not writable by group or others", what, path);
        return -1;
    }
    return 0;
}

static int parse_yes_no(const char *value, int *out) {
    if (strcmp(value, "yes") == 0 || strcmp(value, "true") == 0) {
        *out = 1;
        return 0;
    }
    if (strcmp(value, "no") == 0 || strcmp(value, "false") == 0) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int load_conf(pam_handle_t *pamh, const char *path, struct conf *conf) {
    memset(conf, 0, sizeof *conf);
    conf->timeout = 60;
    conf->codes = 1;
    copy(conf->user_map, sizeof conf->user_map, "%u");
    char *text = malloc(MAX_FILE_BYTES);
    if (text == NULL) return -1;
    if (read_private_file(pamh, path, "configuration", text, MAX_FILE_BYTES) != 0) {
        free(text);
        return -1;
    }
    int status = 0;
    int number = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        number++;
        trim(line);
        if (line[0] == '\0' || line[0] == '#') continue;
        char *equals = strchr(line, '=');
        if (equals == NULL) {
            pam_syslog(pamh, LOG_ERR, "%s line %d: expected `name = value`", path, number);
            status = -1;
            break;
        }
        *equals = '\0';
        char *name = line, *value = equals + 1;
        trim(name);
        trim(value);
        int bad = 0;
        if (strcmp(name, "url") == 0) {
            bad = copy(conf->url, sizeof conf->url, value);
        } else if (strcmp(name, "integration_key_file") == 0) {
            bad = copy(conf->key_file, sizeof conf->key_file, value);
        } else if (strcmp(name, "ca_file") == 0) {
            bad = copy(conf->ca_file, sizeof conf->ca_file, value);
        } else if (strcmp(name, "user_map") == 0) {
            bad = copy(conf->user_map, sizeof conf->user_map, value);
        } else if (strcmp(name, "groups") == 0) {
            bad = copy(conf->groups, sizeof conf->groups, value);
        } else if (strcmp(name, "failmode") == 0) {
            if (strcmp(value, "secure") == 0) conf->failmode_safe = 0;
            else if (strcmp(value, "safe") == 0) conf->failmode_safe = 1;
            else bad = 1;
        } else if (strcmp(name, "timeout") == 0) {
            char *end = NULL;
            errno = 0;
            long seconds = strtol(value, &end, 10);
            if (errno != 0 || end == value || *end != '\0' || seconds < 10 || seconds > 300) bad = 1;
            else conf->timeout = (int)seconds;
        } else if (strcmp(name, "codes") == 0) {
            bad = parse_yes_no(value, &conf->codes);
        } else if (strcmp(name, "unknown_users") == 0) {
            if (strcmp(value, "ignore") == 0) conf->unknown_ignore = 1;
            else if (strcmp(value, "refuse") == 0) conf->unknown_ignore = 0;
            else bad = 1;
        } else {
            pam_syslog(pamh, LOG_ERR, "%s line %d: unknown setting `%.64s`", path, number, name);
            status = -1;
            break;
        }
        if (bad) {
            pam_syslog(pamh, LOG_ERR, "%s line %d: `%s` has a value that is not allowed", path, number, name);
            status = -1;
            break;
        }
    }
    explicit_bzero(text, MAX_FILE_BYTES);
    free(text);
    if (status != 0) return -1;
    if (conf->url[0] == '\0' || conf->key_file[0] == '\0') {
        pam_syslog(pamh, LOG_ERR, "%s: `url` and `integration_key_file` are required", path);
        return -1;
    }
    /* https, or http to this machine's loopback only. */
    CURLU *parsed = curl_url();
    char *scheme = NULL, *host = NULL;
    int ok = parsed != NULL && curl_url_set(parsed, CURLUPART_URL, conf->url, 0) == CURLUE_OK &&
             curl_url_get(parsed, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
             curl_url_get(parsed, CURLUPART_HOST, &host, 0) == CURLUE_OK;
    if (ok) {
        ok = strcmp(scheme, "https") == 0 ||
             (strcmp(scheme, "http") == 0 &&
              (strcmp(host, "127.0.0.1") == 0 || strcmp(host, "[::1]") == 0 || strcmp(host, "localhost") == 0));
    }
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(parsed);
    if (!ok) {
        pam_syslog(pamh, LOG_ERR, "%s: `url` must be https, or http to 127.0.0.1, [::1] or localhost", path);
        return -1;
    }
    size_t len = strlen(conf->url);
    while (len > 0 && conf->url[len - 1] == '/') conf->url[--len] = '\0';
    return 0;
}

/* `user_map` with `%u` the login name and `%%` a percent sign. */
static int map_user(const char *pattern, const char *login, char *out, size_t size) {
    size_t n = 0;
    for (const char *p = pattern; *p != '\0'; p++) {
        const char *piece;
        char single[2] = {0, 0};
        if (*p == '%') {
            p++;
            if (*p == 'u') piece = login;
            else if (*p == '%') piece = "%";
            else return -1;
        } else {
            single[0] = *p;
            piece = single;
        }
        size_t len = strlen(piece);
        if (n + len >= size) return -1;
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
    return 0;
}

/* A buffer for getpwnam_r/getgrnam_r that grows on ERANGE (groups of a directory can be large). */
enum { NOT_FOUND = -1, LOOKUP_FAILED = -2 };

/* The primary group of the account `name` (`is_group` 0), or the id of the group `name` (1). */
static int lookup_id(int is_group, const char *name, gid_t *gid) {
    for (size_t size = 16384; size <= (1u << 24); size *= 4) {
        char *buffer = malloc(size);
        if (buffer == NULL) return LOOKUP_FAILED;
        int error, found;
        if (is_group) {
            struct group entry, *result = NULL;
            error = getgrnam_r(name, &entry, buffer, size, &result);
            found = error == 0 && result != NULL;
            if (found) *gid = entry.gr_gid;
        } else {
            struct passwd entry, *result = NULL;
            error = getpwnam_r(name, &entry, buffer, size, &result);
            found = error == 0 && result != NULL;
            if (found) *gid = entry.pw_gid;
        }
        free(buffer);
        if (error == ERANGE) continue;
        if (error != 0) return LOOKUP_FAILED;
        return found ? 0 : NOT_FOUND;
    }
    return LOOKUP_FAILED;
}

/* 1 when `user` is in one of the space- or comma-separated `groups`, 0 when not;
 * NOT_FOUND when the account is not on this system, LOOKUP_FAILED when the
 * system could not say (a directory down): the caller refuses then. */
static int in_groups(pam_handle_t *pamh, const char *user, const char *groups) {
    gid_t primary;
    int found = lookup_id(0, user, &primary);
    if (found != 0) return found;
    int count = 64;
    gid_t *gids = NULL;
    int listed = 0;
    for (int attempt = 0; attempt < 6 && !listed; attempt++) {
        gid_t *grown = realloc(gids, (size_t)count * sizeof *gids);
        if (grown == NULL) break;
        gids = grown;
        int n = count;
        if (getgrouplist(user, primary, gids, &n) >= 0) {
            count = n;
            listed = 1;
        } else {
            count = n > count ? n : count * 4;
        }
    }
    if (!listed) {
        free(gids);
        return LOOKUP_FAILED;
    }
    char list[1024];
    copy(list, sizeof list, groups);
    int member = 0;
    char *save = NULL;
    for (char *name = strtok_r(list, " ,\t", &save); name != NULL && !member; name = strtok_r(NULL, " ,\t", &save)) {
        gid_t gid;
        int looked = lookup_id(1, name, &gid);
        if (looked == NOT_FOUND) {
            pam_syslog(pamh, LOG_WARNING, "groups: no group named %.64s", name);
            continue;
        }
        if (looked != 0) {
            free(gids);
            return LOOKUP_FAILED;
        }
        for (int i = 0; i < count; i++) {
            if (gids[i] == gid) {
                member = 1;
                break;
            }
        }
    }
    free(gids);
    return member;
}

/* ---- HTTP ---- */

struct answer {
    long status;
    char *body;
    size_t len;
    int too_big;
};

struct client {
    pam_handle_t *pamh;
    const struct conf *conf;
    char *bearer;           /* "Authorization: Bearer …", zeroed when done */
    int allow_interrupt;    /* a caught signal aborts the transfer */
    char error[128];        /* why the daemon could not be reached, for the decision's log line */
};

static size_t on_body(char *data, size_t size, size_t count, void *context) {
    struct answer *answer = context;
    size_t bytes = size * count;
    if (answer->len + bytes > MAX_ANSWER_BYTES) {
        answer->too_big = 1;
        return 0; /* aborts the transfer */
    }
    char *grown = realloc(answer->body, answer->len + bytes + 1);
    if (grown == NULL) return 0;
    answer->body = grown;
    memcpy(answer->body + answer->len, data, bytes);
    answer->len += bytes;
    answer->body[answer->len] = '\0';
    return bytes;
}

static int on_progress(void *context, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
    (void)a, (void)b, (void)c, (void)d;
    const struct client *client = context;
    return client->allow_interrupt && caught_signal != 0;
}

static void answer_free(struct answer *answer) {
    free(answer->body);
    memset(answer, 0, sizeof *answer);
}

enum { HTTP_OK = 0, HTTP_FAILED = -1, HTTP_INTERRUPTED = -2, HTTP_TIMED_OUT = -3 };

/* libcurl's one-time setup, done here before the first transfer would do it: that
 * setup opens the file $SSLKEYLOGFILE names, to log TLS secrets in, and under
 * `sudo -E` or `su` the user chose that variable while the module runs as root
 * (a file created anywhere, with the user's umask). It is hidden from the setup
 * and put back. Once per process. */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_setup = CURLE_FAILED_INIT;

static void setup_curl(void) {
    const char *keylog = getenv("SSLKEYLOGFILE");
    char *saved = keylog != NULL ? strdup(keylog) : NULL;
    if (keylog != NULL) unsetenv("SSLKEYLOGFILE");
    curl_setup = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (saved != NULL) {
        setenv("SSLKEYLOGFILE", saved, 1);
        free(saved);
    }
}

/* One request; HTTP_OK with `answer->status` set, or a failure to reach, read or bound the answer. */
static int http(struct client *client, const char *method, const char *path, const char *body, long seconds, struct answer *answer) {
    memset(answer, 0, sizeof *answer);
    if (pthread_once(&curl_once, setup_curl) != 0 || curl_setup != CURLE_OK) return HTTP_FAILED;
    CURL *curl = curl_easy_init();
    if (curl == NULL) return HTTP_FAILED;
    char url[2048];
    if (snprintf(url, sizeof url, "%s%s", client->conf->url, path) >= (int)sizeof url) {
        curl_easy_cleanup(curl);
        return HTTP_FAILED;
    }
    struct curl_slist *headers = NULL;
    const char *lines[] = {client->bearer, "Content-Type: application/json", "Accept: application/json"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        struct curl_slist *longer = curl_slist_append(headers, lines[i]);
        if (longer == NULL) {
            curl_slist_free_all(headers);
            curl_easy_cleanup(curl);
            return HTTP_FAILED;
        }
        headers = longer;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PROXY, "");
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_SECONDS);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, seconds);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "pam_countersign/1");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, answer);
    curl_easy_setopt(curl, CURLOPT_MAXFILESIZE, (long)MAX_ANSWER_BYTES);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, client);
    if (client->conf->ca_file[0] != '\0') {
        /* The operator's CA alone: not added to the system's directory of CAs. */
        curl_easy_setopt(curl, CURLOPT_CAINFO, client->conf->ca_file);
        curl_easy_setopt(curl, CURLOPT_CAPATH, NULL);
    }
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body != NULL ? body : "{}");
    }
    CURLcode code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &answer->status);
    curl_easy_cleanup(curl);
    curl_slist_free_all(headers);
    if (code == CURLE_ABORTED_BY_CALLBACK) {
        answer_free(answer);
        return HTTP_INTERRUPTED;
    }
    if (code != CURLE_OK || answer->too_big) {
        snprintf(client->error, sizeof client->error, "%s", answer->too_big ? "answer larger than 64 KiB" : curl_easy_strerror(code));
        answer_free(answer);
        return code == CURLE_OPERATION_TIMEDOUT ? HTTP_TIMED_OUT : HTTP_FAILED;
    }
    if (answer->status >= 500) snprintf(client->error, sizeof client->error, "HTTP status %ld", answer->status);
    return HTTP_OK;
}

/* The answer's body as a JSON object (strictly: one object, nothing after it), or NULL. */
static json_object *answer_json(const struct answer *answer) {
    if (answer->body == NULL || answer->len == 0) return NULL;
    json_tokener *tokener = json_tokener_new_ex(MAX_JSON_DEPTH);
    if (tokener == NULL) return NULL;
    json_tokener_set_flags(tokener, JSON_TOKENER_STRICT);
    json_object *object = json_tokener_parse_ex(tokener, answer->body, (int)answer->len);
    int complete = json_tokener_get_error(tokener) == json_tokener_success;
    size_t end = json_tokener_get_parse_end(tokener);
    json_tokener_free(tokener);
    for (; complete && end < answer->len; end++) {
        if (!isspace((unsigned char)answer->body[end])) complete = 0;
    }
    if (object == NULL || !complete || !json_object_is_type(object, json_type_object)) {
        json_object_put(object);
        return NULL;
    }
    return object;
}

/* A string member of at most `max` bytes, or NULL. */
static const char *string_member(json_object *object, const char *name, size_t max) {
    json_object *value = NULL;
    if (object == NULL || !json_object_object_get_ex(object, name, &value) || !json_object_is_type(value, json_type_string)) return NULL;
    const char *text = json_object_get_string(value);
    if (text == NULL || (size_t)json_object_get_string_len(value) > max || strlen(text) != (size_t)json_object_get_string_len(value))
        return NULL;
    return text;
}

/* An approval id as the daemon makes them: URL-safe characters only, so it can stand in a path. */
static int valid_id(const char *id) {
    if (id == NULL) return 0;
    size_t len = strlen(id);
    if (len == 0 || len > 128) return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        int ascii_alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!(ascii_alnum || c == '-' || c == '_')) return 0;
    }
    return 1;
}

static int valid_number(const char *number) {
    if (number == NULL) return 0;
    size_t len = strlen(number);
    if (len == 0 || len > 8) return 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)number[i])) return 0;
    }
    return 1;
}

/* The approval's reference in logs, as the daemon's audit trail names it: the
 * first 12 hex digits of the id's SHA-256. The id itself is not logged. */
static void log_reference(const char *id, char *out, size_t size) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    copy(out, size, "-");
    if (id == NULL || id[0] == '\0' || size < 13) return;
    if (EVP_Digest(id, strlen(id), digest, &length, EVP_sha256(), NULL) != 1 || length < 6) return;
    for (int i = 0; i < 6; i++) snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

/* ---- the login ---- */

enum outcome {
    PENDING,         /* created: a typed code, or the phone, decides */
    APPROVED,        /* approved and completed by this login */
    REFUSED,         /* denied, expired, wrong codes, ... (`reason` says) */
    UNKNOWN_USER,    /* the daemon does not know the user, or the integration does not reach them */
    UNAVAILABLE,     /* the daemon could not be reached, timed out, or answered garbage */
    INTERRUPTED,     /* the login was interrupted: its approval is cancelled */
};

struct login {
    pam_handle_t *pamh;
    struct client client;
    struct signals *signals;
    int create_timed_out; /* the create was not answered in time: an approval may exist */
    int can_prompt;
    char id[129];
    const char *reason;
    const char *via;
};

static void tell(struct login *login, int style, const char *fmt, ...) {
    if (!login->can_prompt && style != PAM_TEXT_INFO && style != PAM_ERROR_MSG) return;
    struct pam_conv *conv = NULL;
    if (pam_get_item(login->pamh, PAM_CONV, (const void **)&conv) != PAM_SUCCESS || conv == NULL || conv->conv == NULL) return;
    va_list args;
    va_start(args, fmt);
    pam_vprompt(login->pamh, style, NULL, fmt, args);
    va_end(args);
}

/* Cancels the login's approval, not interruptible, with a short bound: the interrupted login's last word. */
static void cancel(struct login *login) {
    if (login->id[0] == '\0') return;
    char path[256];
    snprintf(path, sizeof path, "/v1/approvals/%s/cancel", login->id);
    struct answer answer;
    int allow = login->client.allow_interrupt;
    login->client.allow_interrupt = 0;
    if (http(&login->client, "POST", path, "{}", CONNECT_SECONDS, &answer) == HTTP_OK) answer_free(&answer);
    login->client.allow_interrupt = allow;
}

/* The outcome of an approval in `status`; `APPROVED` only once this login completed it. */
static enum outcome finish(struct login *login, const char *status) {
    if (status == NULL) return UNAVAILABLE;
    if (strcmp(status, "approved") == 0) {
        char path[256];
        snprintf(path, sizeof path, "/v1/approvals/%s/complete", login->id);
        struct answer answer;
        int sent = http(&login->client, "POST", path, "{}", 15, &answer);
        if (sent == HTTP_INTERRUPTED) return INTERRUPTED;
        if (sent != HTTP_OK) return UNAVAILABLE;
        json_object *json = answer_json(&answer);
        const char *done = string_member(json, "status", 32);
        enum outcome outcome = REFUSED;
        login->reason = "the approval could not be used";
        if (answer.status == 200 && done != NULL && strcmp(done, "completed") == 0) outcome = APPROVED;
        else if (answer.status >= 500 || (answer.status == 200 && done == NULL)) outcome = UNAVAILABLE;
        json_object_put(json);
        answer_free(&answer);
        return outcome;
    }
    if (strcmp(status, "denied") == 0) login->reason = "denied on the phone";
    else if (strcmp(status, "expired") == 0) login->reason = "the approval expired";
    else if (strcmp(status, "cancelled") == 0) login->reason = "the approval was cancelled";
    else if (strcmp(status, "completed") == 0) login->reason = "the approval was already used";
    else return UNAVAILABLE;
    return REFUSED;
}

static enum outcome create(struct login *login, const char *user, const char *action, const char *service, const char *title,
                           json_object *context, int timeout) {
    json_object *body = json_object_new_object();
    json_object_object_add(body, "user", json_object_new_string(user));
    json_object_object_add(body, "action", json_object_new_string(action));
    json_object_object_add(body, "title", json_object_new_string(title));
    json_object_object_add(body, "context", json_object_get(context));
    /* The approval lives as long as the module waits for it (the daemon takes 10 to 300 s). */
    json_object_object_add(body, "ttl", json_object_new_int(timeout));
    (void)service;
    struct answer answer;
    int sent = http(&login->client, "POST", "/v1/approvals", json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN), 15, &answer);
    json_object_put(body);
    if (sent == HTTP_INTERRUPTED) return INTERRUPTED;
    login->create_timed_out = sent == HTTP_TIMED_OUT;
    if (sent != HTTP_OK) return UNAVAILABLE;
    json_object *json = answer_json(&answer);
    enum outcome outcome = UNAVAILABLE;
    if (answer.status == 201 && json != NULL) {
        const char *id = string_member(json, "approvalId", 128);
        const char *number = string_member(json, "numberCode", 8);
        json_object *member = NULL;
        int number_null = !json_object_object_get_ex(json, "numberCode", &member) || json_object_is_type(member, json_type_null);
        if (valid_id(id) && (number_null || valid_number(number))) {
            copy(login->id, sizeof login->id, id);
            if (number != NULL) tell(login, PAM_TEXT_INFO, "Approve on your phone: %s", number);
            else tell(login, PAM_TEXT_INFO, "Approve on your phone.");
            outcome = PENDING;
        }
    } else if (answer.status == 404 && json != NULL && string_member(json, "error", 64) != NULL &&
               strcmp(string_member(json, "error", 64), "user_not_found") == 0) {
        outcome = UNKNOWN_USER;
    } else if (answer.status == 422) {
        outcome = REFUSED;
        login->reason = "no trusted phone is enrolled for this user";
    } else if (answer.status == 429) {
        outcome = REFUSED;
        login->reason = "too many requests; try again later";
    } else if (answer.status == 401 || answer.status == 403) {
        pam_syslog(login->pamh, LOG_ERR, "the daemon refused the integration key (%ld): check integration_key_file", answer.status);
        outcome = REFUSED;
        login->reason = "this host is not allowed to ask for approvals";
    } else if (answer.status >= 400 && answer.status < 500) {
        pam_syslog(login->pamh, LOG_ERR, "the daemon refused the request (%ld): check user_map", answer.status);
        outcome = REFUSED;
        login->reason = "the request was refused";
    }
    json_object_put(json);
    answer_free(&answer);
    return outcome;
}

/* Seconds on a clock that setting the date does not move. */
static time_t monotonic_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec;
}

/* Sleeps a second, unless a signal asks the login to stop. */
static void pause_a_second(void) {
    struct timespec second = {1, 0};
    while (!caught_signal && nanosleep(&second, &second) != 0 && errno == EINTR) {}
}

/* Waits for the phone's answer until `deadline`, in long polls. A daemon that
 * cannot be reached or answers 5xx meanwhile (a restart) is asked again each
 * second until the deadline: the approval it keeps survives its restart. */
static enum outcome wait_for_phone(struct login *login, time_t deadline) {
    int unreachable = 0;
    for (;;) {
        if (caught_signal) return INTERRUPTED;
        time_t now = monotonic_seconds();
        if (now >= deadline) {
            cancel(login);
            if (unreachable) return UNAVAILABLE;
            login->reason = "no answer from the phone in time";
            return REFUSED;
        }
        long wait = (long)(deadline - now);
        if (wait > LONG_POLL_SECONDS) wait = LONG_POLL_SECONDS;
        char path[256];
        snprintf(path, sizeof path, "/v1/approvals/%s?wait=%ld", login->id, wait);
        struct answer answer;
        time_t asked = monotonic_seconds();
        int sent = http(&login->client, "GET", path, NULL, wait + 15, &answer);
        if (sent == HTTP_INTERRUPTED) return INTERRUPTED;
        if (sent != HTTP_OK || answer.status >= 500) {
            if (sent == HTTP_OK) answer_free(&answer);
            unreachable = 1;
            pause_a_second();
            continue;
        }
        unreachable = 0;
        json_object *json = answer_json(&answer);
        const char *status = string_member(json, "status", 32);
        enum outcome outcome;
        int again = 0;
        if (answer.status == 200 && status != NULL && strcmp(status, "pending") == 0) {
            again = 1;
            outcome = REFUSED;
        } else if (answer.status == 200) {
            const char *via = string_member(json, "via", 32);
            login->via = (via != NULL && strcmp(via, "push") != 0) ? "code" : "push";
            outcome = finish(login, status);
        } else if (answer.status == 404) {
            login->reason = "the approval is gone";
            outcome = REFUSED;
        } else if (answer.status >= 400 && answer.status < 500) {
            login->reason = "the request was refused";
            outcome = REFUSED;
        } else {
            outcome = UNAVAILABLE;
        }
        json_object_put(json);
        answer_free(&answer);
        if (!again) return outcome;
        /* A server answering "pending" at once is asked again a second later, not in a tight loop. */
        if (monotonic_seconds() - asked < 1) pause_a_second();
    }
}

/* Keeps the digits of a typed code (spaces and dashes dropped); -1 unless it is 6 or 10 digits. */
static int typed_code(const char *typed, char *out, size_t size) {
    size_t n = 0;
    for (const char *p = typed; *p != '\0'; p++) {
        if (*p == ' ' || *p == '-') continue;
        if (!isdigit((unsigned char)*p) || n + 1 >= size) return -1;
        out[n++] = *p;
    }
    out[n] = '\0';
    return (n == 6 || n == 10) ? 0 : -1;
}

/* 1: the code approved; 0: wrong; otherwise an outcome to return at once (as negative). */
static int check_code(struct login *login, const char *code, enum outcome *outcome) {
    char path[256];
    snprintf(path, sizeof path, "/v1/approvals/%s/verify-code", login->id);
    json_object *body = json_object_new_object();
    json_object_object_add(body, "code", json_object_new_string(code));
    struct answer answer;
    const char *json_text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
    char *text = json_text != NULL ? strdup(json_text) : NULL;
    json_object_put(body);
    if (text == NULL) {
        *outcome = UNAVAILABLE;
        return -1;
    }
    int sent = http(&login->client, "POST", path, text, 15, &answer);
    explicit_bzero(text, strlen(text));
    free(text);
    if (sent == HTTP_INTERRUPTED) {
        *outcome = INTERRUPTED;
        return -1;
    }
    if (sent != HTTP_OK) {
        *outcome = UNAVAILABLE;
        return -1;
    }
    json_object *json = answer_json(&answer);
    const char *status = string_member(json, "status", 32);
    int result = -1;
    if (answer.status == 200 && status != NULL) {
        login->via = "code";
        *outcome = finish(login, status);
    } else if (answer.status == 400) {
        result = 0;
    } else if (answer.status == 429) {
        login->reason = "too many wrong codes; try again later";
        *outcome = REFUSED;
    } else if (answer.status == 409 || answer.status == 410 || answer.status == 404) {
        login->reason = "the approval ended";
        *outcome = REFUSED;
    } else if (answer.status >= 400 && answer.status < 500) {
        login->reason = "the code was refused";
        *outcome = REFUSED;
    } else {
        *outcome = UNAVAILABLE;
    }
    json_object_put(json);
    answer_free(&answer);
    return result;
}

/* Offers typing a code; `*outcome` set and 1 returned when the code decided the login. */
static int offer_codes(struct login *login, enum outcome *outcome) {
    for (int tries = 0; tries < CODE_TRIES; tries++) {
        char *typed = NULL;
        struct sigaction ours[WATCHED];
        pause_signals(login->signals, ours);
        int asked = pam_prompt(login->pamh, PAM_PROMPT_ECHO_OFF, &typed, "Or type a code from your phone (Enter to wait for the phone): ");
        resume_signals(login->signals, ours);
        if (caught_signal) {
            if (typed != NULL) explicit_bzero(typed, strlen(typed)), free(typed);
            *outcome = INTERRUPTED;
            return 1;
        }
        /* An empty answer, or the end of input: the user answers on the phone. So is
         * the first factor's password given again (sshd's PasswordAuthentication
         * answers every prompt with it): it is never sent as a code. */
        const void *password = NULL;
        int repeated = typed != NULL && pam_get_item(login->pamh, PAM_AUTHTOK, &password) == PAM_SUCCESS && password != NULL &&
                       strcmp(typed, (const char *)password) == 0;
        if (asked != PAM_SUCCESS || typed == NULL || typed[0] == '\0' || repeated) {
            if (typed != NULL) explicit_bzero(typed, strlen(typed));
            free(typed);
            return 0;
        }
        char code[16];
        int well_formed = typed_code(typed, code, sizeof code) == 0;
        explicit_bzero(typed, strlen(typed));
        free(typed);
        if (!well_formed) {
            tell(login, PAM_ERROR_MSG, "A code is 6 digits (offline code) or 10 digits (bypass code).");
            continue;
        }
        int checked = check_code(login, code, outcome);
        explicit_bzero(code, sizeof code);
        if (checked != 0) return 1;
        tell(login, PAM_ERROR_MSG, "That code is not valid.");
    }
    cancel(login);
    login->reason = "too many wrong codes";
    *outcome = REFUSED;
    return 1;
}

static const char *action_for(const char *service, char *buffer, size_t size) {
    if (strcmp(service, "sshd") == 0) return "ssh-login";
    if (strcmp(service, "sudo") == 0 || strcmp(service, "sudo-i") == 0) return "sudo";
    size_t n = 0;
    for (const char *p = service; *p != '\0' && n + 1 < size && n < 64; p++) {
        unsigned char c = (unsigned char)tolower((unsigned char)*p);
        buffer[n++] = (isalnum(c) || c == '_' || c == '.' || c == '-') ? (char)c : '-';
    }
    buffer[n] = '\0';
    if (n == 0 || strcmp(buffer, "password_reset") == 0) return "pam-login";
    return buffer;
}

static void add_context(json_object *context, const char *name, const char *value) {
    if (value == NULL || value[0] == '\0') return;
    char shown[201];
    printable(shown, sizeof shown, value);
    json_object_object_add(context, name, json_object_new_string(shown));
}

static int authenticate(pam_handle_t *pamh, int argc, const char **argv) {
    const char *conf_path = DEFAULT_CONF;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "conf=", 5) == 0) conf_path = argv[i] + 5;
        else pam_syslog(pamh, LOG_WARNING, "unknown argument `%.64s` ignored", argv[i]);
    }
    const char *login_name = NULL;
    if (pam_get_user(pamh, &login_name, NULL) != PAM_SUCCESS || login_name == NULL || login_name[0] == '\0') {
        pam_syslog(pamh, LOG_NOTICE, "user= service=? result=unknown reason=no-user-name");
        return PAM_USER_UNKNOWN;
    }
    const void *item = NULL;
    const char *service = (pam_get_item(pamh, PAM_SERVICE, &item) == PAM_SUCCESS && item != NULL) ? item : "";
    char shown_user[65], shown_service[65];
    log_field(shown_user, sizeof shown_user, login_name);
    log_field(shown_service, sizeof shown_service, service);

    struct conf conf;
    if (load_conf(pamh, conf_path, &conf) != 0 || (conf.ca_file[0] != '\0' && root_owned_file(pamh, conf.ca_file, "ca_file") != 0)) {
        /* A configuration that cannot be read or trusted refuses, whatever failmode would say. */
        pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=refused reason=configuration", shown_user, shown_service);
        return PAM_AUTH_ERR;
    }
    if (conf.groups[0] != '\0') {
        int member = in_groups(pamh, login_name, conf.groups);
        if (member == NOT_FOUND) {
            pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=unknown reason=no-such-account", shown_user, shown_service);
            return PAM_USER_UNKNOWN;
        }
        if (member < 0) {
            pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=refused reason=group-lookup-failed", shown_user, shown_service);
            return PAM_AUTH_ERR;
        }
        if (member == 0) {
            pam_syslog(pamh, LOG_INFO, "user=%s service=%s result=ignored reason=not-in-groups", shown_user, shown_service);
            return PAM_IGNORE;
        }
    }
    char user[321];
    if (map_user(conf.user_map, login_name, user, sizeof user) != 0) {
        pam_syslog(pamh, LOG_ERR, "user_map `%s` cannot be applied (only %%u and %%%% are known)", conf.user_map);
        pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=refused reason=configuration", shown_user, shown_service);
        return PAM_AUTH_ERR;
    }
    char *key = malloc(MAX_KEY_BYTES);
    if (key == NULL) {
        pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=refused reason=out-of-memory", shown_user, shown_service);
        return PAM_BUF_ERR;
    }
    if (read_private_file(pamh, conf.key_file, "integration key file", key, MAX_KEY_BYTES) != 0) {
        free(key);
        pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=refused reason=configuration", shown_user, shown_service);
        return PAM_AUTH_ERR;
    }
    trim(key);
    int key_ok = key[0] != '\0';
    for (const char *p = key; *p != '\0'; p++) {
        if (*p <= 0x20 || *p >= 0x7f) key_ok = 0;
    }
    size_t bearer_size = strlen(key) + 32;
    char *bearer = malloc(bearer_size);
    if (bearer != NULL) snprintf(bearer, bearer_size, "Authorization: Bearer %s", key);
    explicit_bzero(key, MAX_KEY_BYTES);
    free(key);
    if (!key_ok || bearer == NULL) {
        if (bearer != NULL) explicit_bzero(bearer, bearer_size), free(bearer);
        pam_syslog(pamh, LOG_ERR, "%s: the integration key must be one line of printable characters", conf.key_file);
        pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=refused reason=configuration", shown_user, shown_service);
        return PAM_AUTH_ERR;
    }

    struct login login;
    memset(&login, 0, sizeof login);
    login.pamh = pamh;
    login.client.pamh = pamh;
    login.client.conf = &conf;
    login.client.bearer = bearer;
    login.client.allow_interrupt = 1;
    struct pam_conv *conv = NULL;
    login.can_prompt = pam_get_item(pamh, PAM_CONV, (const void **)&conv) == PAM_SUCCESS && conv != NULL && conv->conv != NULL;

    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char shown_host[65];
    printable(shown_host, sizeof shown_host, host);
    char action_buffer[65];
    const char *action = action_for(service, action_buffer, sizeof action_buffer);
    const char *rhost = NULL, *tty = NULL, *ruser = NULL;
    if (pam_get_item(pamh, PAM_RHOST, &item) == PAM_SUCCESS) rhost = item;
    if (pam_get_item(pamh, PAM_TTY, &item) == PAM_SUCCESS) tty = item;
    if (pam_get_item(pamh, PAM_RUSER, &item) == PAM_SUCCESS) ruser = item;
    char title[81];
    if (strcmp(action, "ssh-login") == 0) snprintf(title, sizeof title, "SSH login to %s", shown_host);
    else if (strcmp(action, "sudo") == 0) snprintf(title, sizeof title, "sudo on %s", shown_host);
    else snprintf(title, sizeof title, "%.32s on %.44s", shown_service, shown_host);
    json_object *context = json_object_new_object();
    add_context(context, "host", host);
    add_context(context, "service", service);
    add_context(context, "account", login_name);
    add_context(context, "remoteAddress", rhost);
    /* What the phone shows as where the request came from: the login's client, not this host. */
    add_context(context, "ip", rhost);
    add_context(context, "tty", tty);
    if (strcmp(action, "sudo") == 0) add_context(context, "invokingUser", ruser);

    struct signals signals = {0};
    watch_signals(&signals);
    login.signals = &signals;
    enum outcome outcome = create(&login, user, action, service, title, context, conf.timeout);
    json_object_put(context);
    if (outcome == PENDING) {
        /* Created: a typed code, or the phone. */
        int decided = 0;
        if (login.can_prompt && conf.codes) decided = offer_codes(&login, &outcome);
        if (!decided) outcome = wait_for_phone(&login, monotonic_seconds() + conf.timeout);
    }
    if (outcome == INTERRUPTED) cancel(&login);
    int signo = caught_signal;
    restore_signals(&signals);
    explicit_bzero(bearer, bearer_size);
    free(bearer);

    char reference[16];
    log_reference(login.id, reference, sizeof reference);
    int result;
    switch (outcome) {
    case APPROVED:
        pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=approved via=%s approval=%s", shown_user, shown_service,
                   login.via != NULL ? login.via : "push", reference);
        result = PAM_SUCCESS;
        break;
    case UNKNOWN_USER:
        pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=%s reason=unknown-to-countersign", shown_user, shown_service,
                   conf.unknown_ignore ? "ignored" : "unknown");
        result = conf.unknown_ignore ? PAM_IGNORE : PAM_USER_UNKNOWN;
        break;
    case INTERRUPTED:
        pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=interrupted approval=%s", shown_user, shown_service, reference);
        result = PAM_AUTH_ERR;
        break;
    case UNAVAILABLE:
        if (login.client.error[0] == '\0') copy(login.client.error, sizeof login.client.error, "an answer that is not the API's");
        /* safe lets a login through only when no approval was made: once one exists,
         * a daemon that stops answering refuses, and the approval is cancelled. A
         * create not answered in time refuses too: the user can stop their own
         * sudo (SIGSTOP) until any wait times out, and an approval may exist. */
        if (login.id[0] != '\0') cancel(&login);
        if (conf.failmode_safe && login.id[0] == '\0' && !login.create_timed_out) {
            pam_syslog(pamh, LOG_WARNING, "user=%s service=%s result=allowed reason=daemon-unavailable failmode=safe error=\"%s\" approval=%s",
                       shown_user, shown_service, login.client.error, reference);
            result = PAM_SUCCESS;
        } else {
            pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=refused reason=daemon-unavailable error=\"%s\" approval=%s", shown_user,
                       shown_service, login.client.error, reference);
            tell(&login, PAM_ERROR_MSG, "Login refused: the approval service is unavailable.");
            result = PAM_AUTH_ERR;
        }
        break;
    case PENDING:
    case REFUSED:
    default:
        pam_syslog(pamh, LOG_NOTICE, "user=%s service=%s result=refused reason=\"%s\" approval=%s", shown_user, shown_service,
                   login.reason != NULL ? login.reason : "refused", reference);
        tell(&login, PAM_ERROR_MSG, "Login refused: %s.", login.reason != NULL ? login.reason : "refused");
        result = PAM_AUTH_ERR;
        break;
    }
    /* The signal that interrupted the login goes on to whoever was there before us. */
    if (signo != 0) raise(signo);
    return result;
}

EXPORT PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    return authenticate(pamh, argc, argv);
}

EXPORT PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh, (void)flags, (void)argc, (void)argv;
    return PAM_SUCCESS;
}
