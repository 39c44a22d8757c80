// Page-cache probes: drop a file from the cache, count which pages of a mapping are resident.
//
// Used to check that opening a model reads only its header, and to tell cold from warm loads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace util {

// Writes back and drops every cached page of `path` (fsync + posix_fadvise DONTNEED). The kernel
// may keep pages that are mapped or locked elsewhere; check with resident_pages.
Status drop_from_page_cache(const std::string& path);

// Pages overlapping `range` (which must lie inside a mapping) that are in memory (mincore).
// Pages are counted whole: the range is widened to page boundaries.
Result<size_t> resident_pages(std::span<const uint8_t> range);
// The same pages one by one: 1 where resident, 0 where not.
Result<std::vector<unsigned char>> resident_map(std::span<const uint8_t> range);

// Pages overlapping `range` that this process has mapped in (its page table holds them: they count
// in its RSS), from /proc/self/pagemap. A file mapping's pages may be resident in the page cache
// (resident_pages) yet not mapped in until the process first reads them.
Result<size_t> mapped_in_pages(std::span<const uint8_t> range);

size_t page_size();

}  // namespace util
