/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/resolve.c - environment precedence and merge (docs/reference/api.md §5.2).
 */
#include "control/env/resolve.h"

#include <string.h>

#include <jansson.h>

#include "base/mem.h"

static bool binds(const struct sl_env_row *row, const char *repo)
{
    for (size_t i = 0; i < row->n_repos; i++) {
        if (strcmp(row->repos[i], repo) == 0) {
            return true;
        }
    }
    return false;
}

static bool has_user(const struct sl_resolve_request *req)
{
    return req->user_id != NULL && req->user_id[0] != '\0';
}

/* May the caller see `row`? Global environments: everyone. User environments: their owner. */
static bool is_visible(const struct sl_resolve_request *req, const struct sl_env_row *row)
{
    if (row->scope == SL_SCOPE_GLOBAL) {
        return true;
    }
    return has_user(req) && strcmp(row->owner_id, req->user_id) == 0;
}

static bool is_default(const struct sl_env_row *row)
{
    return row->scope == SL_SCOPE_GLOBAL && row->is_default;
}

/* Steps 2-4 in order over the candidates; NONE when nothing qualifies. */
static enum sl_matched_by pick(const struct sl_resolve_request *req,
                               const struct sl_env_row **chosen)
{
    const struct sl_env_row *found[SL_MATCHED_BY_NONE] = { NULL };

    for (size_t i = 0; i < req->n_candidates; i++) {
        const struct sl_env_row *c = req->candidates[i];
        enum sl_matched_by m = SL_MATCHED_BY_NONE;

        if (c == NULL) {
            continue;
        }
        if (is_default(c)) {
            m = SL_MATCHED_BY_GLOBAL_DEFAULT;
        } else if (c->scope == SL_SCOPE_GLOBAL && binds(c, req->repo)) {
            m = SL_MATCHED_BY_GLOBAL_BINDING;
        } else if (c->scope == SL_SCOPE_USER && !req->webhook && is_visible(req, c)
                   && binds(c, req->repo)) {
            m = SL_MATCHED_BY_USER_BINDING;
        }
        if (m != SL_MATCHED_BY_NONE && found[m] == NULL) {
            found[m] = c;
        }
    }
    for (int m = SL_MATCHED_BY_USER_BINDING; m < SL_MATCHED_BY_NONE; m++) {
        if (found[m] != NULL) {
            *chosen = found[m];
            return (enum sl_matched_by)m;
        }
    }
    *chosen = NULL;
    return SL_MATCHED_BY_NONE;
}

static const struct sl_env_row *find_default(const struct sl_resolve_request *req)
{
    for (size_t i = 0; i < req->n_candidates; i++) {
        if (req->candidates[i] != NULL && is_default(req->candidates[i])) {
            return req->candidates[i];
        }
    }
    return NULL;
}

/* Appends the variables of `vars` whose names are not yet in the result. */
static int merge_vars(struct sl_resolve_result *r, json_t *vars, bool inherited)
{
    size_t n = r->n_vars + json_array_size(vars);
    struct sl_resolve_var *grown;
    size_t i;
    json_t *v;

    if (json_array_size(vars) == 0) {
        return 0;
    }
    grown = sl_realloc(r->vars, n * sizeof(*grown));
    SL_ENSURE(grown != NULL, SL_ENOMEM);
    r->vars = grown;
    json_array_foreach(vars, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        bool shadowed = false;

        for (size_t j = 0; j < r->n_vars && !shadowed; j++) {
            shadowed = strcmp(r->vars[j].name, name) == 0;
        }
        if (!shadowed) {
            r->vars[r->n_vars++] = (struct sl_resolve_var){
                .name = name,
                .sealed = json_string_value(json_object_get(v, "sealed")),
                .secret = json_is_true(json_object_get(v, "secret")),
                .inherited = inherited,
            };
        }
    }
    return 0;
}

static int load_vars(const struct sl_env_row *row, json_t **out)
{
    return sl_env_load_vars(row->env_json != NULL ? row->env_json : "[]", out);
}

/* The merge of §5.2: resources from the chosen one, else the default, else built in; network
 * and egress from the chosen one only; variables the union, the chosen one's names first. */
static int merge(const struct sl_resolve_request *req, struct sl_resolve_result *r)
{
    const struct sl_env_row *c = r->chosen;
    const struct sl_env_row *d = r->fallback;

    r->base_image = req->default_image != NULL ? req->default_image : SL_ENV_DEFAULT_IMAGE;
    /* The pull policy and the registry's credentials go with the image. */
    if (c != NULL && c->base_image != NULL && c->base_image[0] != '\0') {
        r->base_image = c->base_image;
        r->image_pull_always = c->image_pull_always;
        r->registry_json = c->registry_json;
    } else if (d != NULL && d->base_image != NULL && d->base_image[0] != '\0') {
        r->base_image = d->base_image;
        r->image_pull_always = d->image_pull_always;
        r->registry_json = d->registry_json;
    }
    r->cpus_centi = c != NULL && c->cpus_centi > 0   ? c->cpus_centi
                    : d != NULL && d->cpus_centi > 0 ? d->cpus_centi
                                                     : SL_ENV_DEFAULT_CPUS_CENTI;
    r->memory_bytes = c != NULL && c->memory_bytes > 0   ? c->memory_bytes
                      : d != NULL && d->memory_bytes > 0 ? d->memory_bytes
                                                         : SL_ENV_DEFAULT_MEMORY_BYTES;
    r->network = c != NULL && c->network;
    r->egress_json = r->network ? c->egress_json : NULL;
    if (c != NULL) {
        SL_TRY(load_vars(c, &r->_chosen_vars));
        SL_TRY(merge_vars(r, r->_chosen_vars, false));
    }
    if (d != NULL && d != c) {
        SL_TRY(load_vars(d, &r->_fallback_vars));
        SL_TRY(merge_vars(r, r->_fallback_vars, true));
    }
    return 0;
}

int sl_resolve_run(const struct sl_resolve_request *req, struct sl_resolve_result *out)
{
    int rc;

    memset(out, 0, sizeof(*out));
    SL_ENSURE(req->repo != NULL && sl_env_repo_is_valid(req->repo, strlen(req->repo)), SL_EINVAL);
    if (req->explicit_env != NULL) {
        SL_ENSURE(is_visible(req, req->explicit_env), SL_ENOTFOUND);
        out->matched_by = SL_MATCHED_BY_EXPLICIT;
        out->chosen = req->explicit_env;
    } else {
        out->matched_by = pick(req, &out->chosen);
    }
    out->fallback = find_default(req);
    rc = merge(req, out);
    if (rc != 0) {
        sl_resolve_finish(out);
    }
    return rc;
}

void sl_resolve_finish(struct sl_resolve_result *r)
{
    sl_free(r->vars);
    json_decref(r->_chosen_vars);
    json_decref(r->_fallback_vars);
    memset(r, 0, sizeof(*r));
}

const char *sl_resolve_matched_by_name(enum sl_matched_by m)
{
    switch (m) {
    case SL_MATCHED_BY_EXPLICIT:
        return "explicit";
    case SL_MATCHED_BY_USER_BINDING:
        return "user-binding";
    case SL_MATCHED_BY_GLOBAL_BINDING:
        return "global-binding";
    case SL_MATCHED_BY_GLOBAL_DEFAULT:
        return "global-default";
    case SL_MATCHED_BY_NONE:
        return "none";
    }
    return "none";
}

static json_t *summary(const struct sl_env_row *row, bool with_scope)
{
    if (row == NULL) {
        return json_null();
    }
    if (!with_scope) {
        return json_pack("{s:s, s:s}", "id", row->id, "name", row->name);
    }
    return json_pack("{s:s, s:s, s:s}", "id", row->id, "name", row->name, "scope",
                     row->scope == SL_SCOPE_GLOBAL ? "global" : "user");
}

static int render_vars(const struct sl_resolve_result *r, const struct sl_env_sealer *sealer,
                       json_t *undecryptable, json_t *obj)
{
    json_t *list = json_array();
    int rc = json_object_set_new(obj, "env", list) == 0 ? 0 : SL_ENOMEM;

    for (size_t i = 0; i < r->n_vars && rc == 0; i++) {
        const struct sl_resolve_var *v = &r->vars[i];
        json_t *entry = NULL;

        rc = sl_env_render_var(v->name, v->secret, v->sealed, sealer, undecryptable, &entry);
        if (rc == 0 && json_object_set_new(entry, "inherited", json_boolean(v->inherited)) != 0) {
            rc = SL_ENOMEM;
        }
        if (rc == 0 && json_array_append_new(list, entry) != 0) {
            rc = SL_ENOMEM;
        } else if (rc != 0) {
            json_decref(entry);
        }
    }
    return rc;
}

int sl_resolve_render(const struct sl_resolve_result *r, const char *repo,
                      const struct sl_env_sealer *sealer, json_t **out)
{
    char memory[32];
    json_t *undecryptable = json_array();
    json_t *egress = NULL;
    json_t *obj;
    int rc;

    sl_env_format_memory(r->memory_bytes, memory, sizeof(memory));
    obj = json_pack("{s:s, s:s, s:o, s:o, s:s, s:s, s:o, s:s, s:s}", "repo", repo, "matched_by",
                    sl_resolve_matched_by_name(r->matched_by), "environment",
                    summary(r->chosen, true), "default_environment", summary(r->fallback, false),
                    "base_image", r->base_image, "image_pull",
                    r->image_pull_always ? "always" : "if-missing", "cpus",
                    sl_env_cpus_json(r->cpus_centi), "memory", memory, "network",
                    r->network ? "on" : "off");
    rc = obj != NULL && undecryptable != NULL ? 0 : SL_ENOMEM;
    if (rc == 0) {
        rc = render_vars(r, sealer, undecryptable, obj);
    }
    if (rc == 0) {
        rc = sl_env_render_egress(r->egress_json, sealer, undecryptable, &egress);
    }
    if (rc == 0) {
        rc = json_object_set_new(obj, "egress", egress) == 0 ? 0 : SL_ENOMEM;
    }
    if (rc == 0 && json_array_size(undecryptable) > 0) {
        rc = json_object_set(obj, "undecryptable", undecryptable) == 0 ? 0 : SL_ENOMEM;
    }
    json_decref(undecryptable);
    if (rc != 0) {
        json_decref(obj);
        obj = NULL;
    }
    *out = obj;
    return rc;
}
