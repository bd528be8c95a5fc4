#include "loco/sweep/sweep_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <toml.hpp>

#include "loco/config/load_config.h"
#include "loco/config/toml_text.h"
#include "loco/util/error.h"

namespace loco {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTopLevelKeys = "base, out_dir, jobs, threads, [eval], [set], [axes], [[grid]], [best] and [profile.NAME]";

// A key's value with where it was written: toml11's tables are unordered, and axes keep the file's order.
struct Entry {
  std::string key;
  toml::value value;
  std::pair<std::uint_least32_t, std::uint_least32_t> at;  // line, column
};

// `section.key` entries of a table, nested tables flattened ([axes.diloco] outer_lr = … is
// "diloco.outer_lr"), in the order they were written.
void flatten(const toml::value& table, const std::string& prefix, std::vector<Entry>& out) {
  for (const auto& [key, value] : table.as_table()) {
    const std::string name = prefix.empty() ? key : prefix + "." + key;
    if (value.is_table()) {
      flatten(value, name, out);
    } else {
      const auto where = value.location();
      out.push_back({name, value, {where.line(), where.column()}});
    }
  }
}

std::vector<Entry> in_file_order(const toml::value& table) {
  std::vector<Entry> out;
  flatten(table, "", out);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.at < b.at; });
  return out;
}

std::vector<Entry> entries_of(const toml::value& root, const std::string& section, const std::string& where) {
  if (!root.contains(section)) return {};
  const toml::value& table = root.at(section);
  if (!table.is_table()) {
    throw ConfigError(fmt::format("{}[{}] must be a table of `section.key` settings", where, section));
  }
  return in_file_order(table);
}

// What `loco train --set key=VALUE` takes for a scalar of the sweep file.
std::string value_text(const toml::value& v, const std::string& key) {
  if (v.is_string()) return v.as_string().str;
  if (v.is_integer()) return std::to_string(v.as_integer());
  if (v.is_floating()) return fmt::format("{}", v.as_floating());  // the shortest text that reads back the same
  if (v.is_boolean()) return v.as_boolean() ? "true" : "false";
  throw ConfigError(fmt::format("{}: a setting's value is a number, a string or true/false, not {}", key,
                                toml::stringize(v.type())));
}

// The sweep itself decides where each run writes and how many threads it uses.
void refuse_reserved(const std::string& key, const std::string& where) {
  if (key == "train.out_dir") {
    throw ConfigError(fmt::format("{}train.out_dir: each run writes to out_dir/RUN_NAME; set the sweep's out_dir "
                                  "instead",
                                  where));
  }
  if (key == "train.threads") {
    throw ConfigError(fmt::format("{}train.threads: set the sweep's threads = N instead (every run uses it)", where));
  }
}

SweepAxis fixed_setting(const Entry& e, const std::string& where) {
  refuse_reserved(e.key, where);
  const std::string value = value_text(e.value, where + e.key);
  return {e.key, {value}, {{e.key + "=" + value}}};
}

// One value of a compound axis: a table with a name and the settings it stands for.
void add_compound_value(SweepAxis& axis, const toml::value& table, const std::string& where) {
  std::vector<std::string> overrides;
  std::string name;
  for (const Entry& e : in_file_order(table)) {
    if (e.key == "name") {
      if (!e.value.is_string() || e.value.as_string().str.empty()) {
        throw ConfigError(fmt::format("{}{}: name must be a non-empty string", where, axis.key));
      }
      name = e.value.as_string().str;
      continue;
    }
    refuse_reserved(e.key, where + axis.key + ".");
    overrides.push_back(e.key + "=" + value_text(e.value, where + axis.key + "." + e.key));
  }
  if (name.empty()) {
    throw ConfigError(fmt::format("{}{}: each value of a compound axis is a table with a name = \"...\" (it names "
                                  "the runs) and the settings it stands for",
                                  where, axis.key));
  }
  axis.values.push_back(name);
  axis.overrides.push_back(std::move(overrides));
}

SweepAxis axis_of(const Entry& e, const std::string& where) {
  if (!e.value.is_array() || e.value.as_array().empty()) {
    throw ConfigError(fmt::format("{}{} must be a non-empty array of values, e.g. \"{}\" = [1, 2]", where, e.key,
                                  e.key));
  }
  SweepAxis axis{e.key, {}, {}};
  const auto& values = e.value.as_array();
  if (values.front().is_table()) {
    if (e.key.find('.') != std::string::npos) {
      throw ConfigError(fmt::format("{}{}: an axis of tables is a compound axis; name it without a '.' (e.g. size), "
                                    "since dotted names are config keys",
                                    where, e.key));
    }
    for (const toml::value& v : values) {
      if (!v.is_table()) throw ConfigError(fmt::format("{}{}: mix no tables with plain values", where, e.key));
      add_compound_value(axis, v, where);
    }
  } else {
    refuse_reserved(e.key, where);
    for (const toml::value& v : values) {
      axis.values.push_back(value_text(v, where + e.key));
      axis.overrides.push_back({e.key + "=" + axis.values.back()});
    }
  }
  const std::set<std::string> distinct(axis.values.begin(), axis.values.end());
  if (distinct.size() != axis.values.size()) {
    throw ConfigError(fmt::format("{}{} lists a value twice", where, e.key));
  }
  return axis;
}

// A config key set twice by one table's [set], or by two of its axes (as "model.hidden_size" and under
// [axes.model], or by a compound axis too), is refused: one of the two was dropped without a word, and runs
// named for its values trained with the other's. (An axis replaces a [set] value of its key, and a
// [[grid]]'s settings replace the file's, as documented.)
void refuse_keys_set_twice(const SweepGrid& grid, const std::string& where) {
  std::map<std::string, std::string> set_by;  // config key → the entry that sets it
  const auto claim = [&](const SweepAxis& entry, const std::string& kind) {
    std::set<std::string> keys;
    for (const auto& overrides : entry.overrides) {
      for (const std::string& assignment : overrides) keys.insert(assignment.substr(0, assignment.find('=')));
    }
    const std::string name = fmt::format("{} {}", kind, entry.key);
    for (const std::string& key : keys) {
      const auto [at, fresh] = set_by.emplace(key, name);
      if (!fresh) {
        throw ConfigError(
            fmt::format("{}{} is set twice: by {} and by {}. Give each key once (a quoted "
                        "\"section.key\" and a nested [section] table name the same key)",
                        where, key, at->second, name));
      }
    }
  };
  for (const SweepAxis& fixed : grid.fixed) claim(fixed, "[set]");
  set_by.clear();
  for (const SweepAxis& axis : grid.axes) claim(axis, "the axis");
}

void read_settings(const toml::value& table, const std::string& where, SweepGrid& grid) {
  SweepGrid own;
  for (const Entry& e : entries_of(table, "set", where)) own.fixed.push_back(fixed_setting(e, where + "set."));
  for (const Entry& e : entries_of(table, "axes", where)) own.axes.push_back(axis_of(e, where + "axes."));
  refuse_keys_set_twice(own, where);
  grid.fixed.insert(grid.fixed.end(), own.fixed.begin(), own.fixed.end());
  grid.axes.insert(grid.axes.end(), own.axes.begin(), own.axes.end());
}

// The file's [set] and [axes], and those of the [[grid]] table `g` (null: no grid tables).
SweepGrid read_grid(const toml::value& root, const toml::value& g) {
  SweepGrid grid;
  read_settings(root, "", grid);
  if (g.is_uninitialized()) return grid;
  if (!g.is_table()) throw ConfigError("grid: write each grid as a [[grid]] table");
  for (const auto& [key, value] : g.as_table()) {
    if (key != "name" && key != "set" && key != "axes") {
      throw ConfigError(fmt::format("unknown key 'grid.{}'; a [[grid]] has name, [grid.set] and [grid.axes]", key));
    }
  }
  if (!g.contains("name") || !g.at("name").is_string() || g.at("name").as_string().str.empty()) {
    throw ConfigError("each [[grid]] needs a name = \"...\" (it starts the names of its runs)");
  }
  grid.name = g.at("name").as_string().str;
  read_settings(g, "grid " + grid.name + ": ", grid);
  return grid;
}

template <typename T>
T whole_number(const toml::value& table, const std::string& key, T fallback, T least, T most,
               const std::string& where) {
  if (!table.contains(key)) return fallback;
  const toml::value& v = table.at(key);
  if (!v.is_integer() || v.as_integer() < least || v.as_integer() > most) {
    throw ConfigError(fmt::format("{}{} must be a whole number from {} to {}", where, key, least, most));
  }
  return static_cast<T>(v.as_integer());
}

// A path the file gives (base, out_dir): a string that is not empty ("" was "cannot use '': Invalid argument").
std::string path_setting(const toml::value& table, const std::string& key, const std::string& where) {
  if (!table.at(key).is_string()) {
    throw ConfigError(fmt::format("{}{} is missing or not a string: write {} = \"...\"", where, key, key));
  }
  const std::string& path = table.at(key).as_string().str;
  if (path.empty()) throw ConfigError(fmt::format("{}{} is empty: write {} = \"...\" with a path", where, key, key));
  return path;
}

// `has`: what the table may hold, as a sentence's end ("a [[grid]] has name, [grid.set] and [grid.axes]").
void refuse_unknown(const toml::value& table, const std::set<std::string>& known, const std::string& where,
                    const std::string& has) {
  for (const auto& [key, value] : table.as_table()) {
    if (!known.count(key)) throw ConfigError(fmt::format("unknown key '{}{}'; {}", where, key, has));
  }
}

// out_dir, jobs, threads and [eval] of the file, or of a profile over them (`where`: "profile.gpu.").
void read_scalars(const toml::value& table, const std::string& where, SweepFile& out) {
  if (table.contains("out_dir")) out.out_dir = path_setting(table, "out_dir", where);
  out.jobs = whole_number(table, "jobs", out.jobs, 1, kMaxSweepJobs, where);
  out.threads = whole_number(table, "threads", out.threads, 0, static_cast<int>(kMostThreads), where);
  if (!table.contains("eval")) return;
  const toml::value& eval = table.at("eval");
  if (!eval.is_table()) throw ConfigError(fmt::format("[{}eval] must be a table: batches, batch_size", where));
  refuse_unknown(eval, {"batches", "batch_size"}, where + "eval.", "[eval] has batches and batch_size");
  constexpr auto kAny = std::numeric_limits<std::int64_t>::max();  // loco eval takes the whole split at most
  out.eval_batches = whole_number<std::int64_t>(eval, "batches", out.eval_batches, 1, kAny, where + "eval.");
  out.eval_batch_size = whole_number<std::int64_t>(eval, "batch_size", out.eval_batch_size, 0, kAny, where + "eval.");
}

void read_best(const toml::value& root, SweepFile& out) {
  if (!root.contains("best")) return;
  const toml::value& best = root.at("best");
  if (!best.is_table()) throw ConfigError("[best] must be a table: tuned = [...] and [best.repeat]");
  refuse_unknown(best, {"tuned", "repeat"}, "best.", "[best] has tuned and [best.repeat]");
  if (!best.contains("tuned") || !best.at("tuned").is_array() || best.at("tuned").as_array().empty()) {
    throw ConfigError("best.tuned must list the axes tuned in each cell, e.g. tuned = [\"diloco.outer_lr\"]");
  }
  for (const toml::value& v : best.at("tuned").as_array()) {
    if (!v.is_string()) throw ConfigError("best.tuned lists axis names as strings");
    out.tuned.push_back(v.as_string().str);
  }
  for (const Entry& e : entries_of(best, "repeat", "best.")) {
    SweepAxis axis = axis_of(e, "best.repeat.");
    if (axis.key.find('.') == std::string::npos) {
      throw ConfigError(fmt::format("best.repeat.{}: repeat a config key (e.g. \"train.seed\" = [1, 2])", axis.key));
    }
    out.repeats.push_back(std::move(axis));
  }
}

bool has_axis(const SweepGrid& grid, const std::string& key) {
  return std::any_of(grid.axes.begin(), grid.axes.end(), [&](const SweepAxis& a) { return a.key == key; });
}

// A profile's settings and axes replace the file's of the same key in every grid.
void apply_profile(const toml::value& root, const std::string& name, SweepFile& out) {
  const std::string where = "profile." + name + ".";
  if (!root.contains("profile") || !root.at("profile").is_table() || !root.at("profile").contains(name)) {
    std::vector<std::string> known;
    if (root.contains("profile") && root.at("profile").is_table()) {
      for (const auto& [key, value] : root.at("profile").as_table()) known.push_back(key);
    }
    throw ConfigError(fmt::format("no [profile.{}] in this file; its profiles: {}", name,
                                  known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
  }
  const toml::value& profile = root.at("profile").at(name);
  if (!profile.is_table()) throw ConfigError(fmt::format("[{}] must be a table", where.substr(0, where.size() - 1)));
  refuse_unknown(profile, {"out_dir", "jobs", "threads", "eval", "set", "axes", "grid"}, where,
                 "a profile has out_dir, jobs, threads, [eval], [set], [axes] and [[grid]]");
  read_scalars(profile, where, out);
  // Its own grids, when it has some, take the place of the file's (each still adds to the file's [set]
  // and [axes]): the tuned ranges of larger models are not those of smaller ones.
  if (profile.contains("grid")) {
    if (!profile.at("grid").is_array()) {
      throw ConfigError(fmt::format("{}grid: write each grid as a [[{}grid]] table", where, where));
    }
    out.grids.clear();
    for (const toml::value& g : profile.at("grid").as_array()) out.grids.push_back(read_grid(root, g));
  }
  SweepGrid replacing;
  read_settings(profile, where, replacing);
  for (const SweepAxis& set : replacing.fixed) {
    for (SweepGrid& grid : out.grids) {
      if (has_axis(grid, set.key)) {
        throw ConfigError(fmt::format("{}set.{} is an axis of the file: replace it in [{}axes]", where, set.key, where));
      }
      grid.fixed.erase(std::remove_if(grid.fixed.begin(), grid.fixed.end(),
                                      [&](const SweepAxis& s) { return s.key == set.key; }),
                       grid.fixed.end());
      grid.fixed.push_back(set);
    }
  }
  for (const SweepAxis& axis : replacing.axes) {
    bool found = false;
    for (SweepGrid& grid : out.grids) {
      for (SweepAxis& a : grid.axes) {
        if (a.key == axis.key) {
          a = axis;
          found = true;
        }
      }
    }
    if (!found) {
      throw ConfigError(fmt::format("{}axes.{} replaces an axis the file does not have; add it to [axes] first",
                                    where, axis.key));
    }
  }
}

// Every tuned key is an axis somewhere; no repeat key is one (a repeat would contradict its cell).
void check_best(const SweepFile& out) {
  for (const std::string& key : out.tuned) {
    if (std::none_of(out.grids.begin(), out.grids.end(), [&](const SweepGrid& g) { return has_axis(g, key); })) {
      throw ConfigError(fmt::format("best.tuned names '{}', which is no axis of the file", key));
    }
  }
  for (const SweepAxis& repeat : out.repeats) {
    for (const SweepGrid& grid : out.grids) {
      if (has_axis(grid, repeat.key)) {
        throw ConfigError(fmt::format("best.repeat.{} is also an axis; repeat a key the grid does not vary",
                                      repeat.key));
      }
    }
  }
}

}  // namespace

SweepFile read_sweep_file(const fs::path& file, const std::string& profile) {
  const toml::value root = parse_toml_file(file, "sweep file");
  SweepFile out;
  out.file = file;
  try {
    refuse_unknown(root, {"base", "out_dir", "jobs", "threads", "eval", "set", "axes", "grid", "best", "profile"}, "",
                   fmt::format("a sweep file has {}", kTopLevelKeys));
    for (const char* key : {"base", "out_dir"}) {
      if (!root.contains(key)) {
        throw ConfigError(fmt::format("{} is missing or not a string: write {} = \"...\"", key, key));
      }
    }
    out.base = file.parent_path() / path_setting(root, "base", "");
    read_scalars(root, "", out);
    // The file's own [set] and [axes] make one grid; with [[grid]] tables, each adds its settings and axes
    // to those, and the runs are all of theirs.
    if (root.contains("grid")) {
      if (!root.at("grid").is_array()) throw ConfigError("grid: write each grid as a [[grid]] table");
      for (const toml::value& g : root.at("grid").as_array()) out.grids.push_back(read_grid(root, g));
    } else {
      out.grids.push_back(read_grid(root, toml::value()));
    }
    read_best(root, out);
    if (!profile.empty()) apply_profile(root, profile, out);
    check_best(out);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", file.string(), e.what()));
  } catch (const std::exception& e) {  // toml11's type errors
    throw ConfigError(fmt::format("{}: {}", file.string(), e.what()));
  }
  return out;
}

}  // namespace loco
