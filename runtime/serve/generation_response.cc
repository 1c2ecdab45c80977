#include "runtime/serve/generation_response.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <utility>

#include "runtime/serve/api_error.h"

namespace tpserve::serve {
namespace {

using Streams = std::vector<std::shared_ptr<RequestStream>>;

constexpr std::chrono::milliseconds kPollInterval{200};
// A stream of several choices waits this long on its first unfinished choice before looking at the others
// (a chunk of another choice waits at most this).
constexpr std::chrono::milliseconds kChoicePoll{5};

// A failed request's error body: the engine refusing it (a request that can never run) is the client's
// error, anything else the engine's.
nlohmann::ordered_json engine_error(const StreamUpdate& u) {
  return u.refused ? ApiError(400, u.error, "", "invalid_value").body()
                   : ApiError(500, u.error, "", "engine_error").body();
}

// Adds choice `index`'s counts to a response's usage: each prompt once (its cached share as its first
// choice found it; choices are prompt-major, per_prompt a prompt), every choice's tokens.
void add_choice_usage(Usage& total, size_t index, int per_prompt, const Usage& choice) {
  if (index % static_cast<size_t>(std::max(per_prompt, 1)) == 0)
    total.prompt_tokens += choice.prompt_tokens, total.cached_tokens += choice.cached_tokens;
  total.completion_tokens += choice.completion_tokens;
}

void cancel_all(const Streams& streams) {
  for (const auto& stream : streams) stream->cancel();
}

// Calls on_written when the response object goes away (httplib destroys it after writing, or on failure).
std::function<void(bool)> releaser(Streams streams, std::function<void()> on_written) {
  return [streams = std::move(streams), on_written = std::move(on_written)](bool success) {
    if (!success) cancel_all(streams);
    if (on_written) on_written();
  };
}

// The finish reason a client sees: "tool_calls" where the answer ended by itself with tool calls made.
std::string finish_reason_for(const std::string& engine_reason, int tool_calls) {
  return tool_calls > 0 && engine_reason == "stop" ? "tool_calls" : engine_reason;
}

// Watches a client between writes: true (and every stream cancelled) once it has gone, asked at most every
// kPollInterval.
struct GoneWatch {
  std::function<bool()> client_gone;
  std::chrono::steady_clock::time_point next_check = std::chrono::steady_clock::now() + kPollInterval;
  bool gone(const Streams& streams) {
    const auto now = std::chrono::steady_clock::now();
    if (!client_gone || now < next_check) return false;
    next_check = now + kPollInterval;
    if (!client_gone()) return false;
    cancel_all(streams);
    return true;
  }
};

}  // namespace

void respond_whole(httplib::Response& res, GenerationResponse g) {
  std::vector<StreamUpdate> all(g.streams.size());
  GoneWatch watch{std::move(g.client_gone)};
  auto finished = [&] {
    return std::all_of(all.begin(), all.end(), [](const auto& u) { return u.finished; });
  };
  auto failed = [&] {
    return std::any_of(all.begin(), all.end(), [](const auto& u) { return !u.error.empty(); });
  };
  while (!finished() && !failed()) {
    // The first unfinished choice waits; the others are only looked at (their streams keep what comes).
    bool waited = false;
    for (size_t i = 0; i < g.streams.size(); ++i) {
      if (all[i].finished) continue;
      StreamUpdate u;
      if (g.streams[i]->next(u, waited ? std::chrono::milliseconds(0) : kPollInterval))
        all[i].merge(std::move(u));
      waited = true;
    }
    watch.gone(g.streams);  // nobody will read the answer: free the sequences now
  }
  for (const StreamUpdate& u : all) {
    if (u.error.empty()) continue;
    // The body set directly: an error status with a content provider (and so an empty body) would have the
    // server's error handler write its generic body over it.
    res.status = u.refused ? 400 : 500;
    res.set_content(engine_error(u).dump(), "application/json");
    cancel_all(g.streams);
    if (g.on_written) g.on_written();  // the request is over; nothing waits on the write
    return;
  }
  Usage usage{0, 0, 0};
  std::vector<Choice> choices;
  for (size_t i = 0; i < all.size(); ++i) {
    StreamUpdate& u = all[i];
    add_choice_usage(usage, i, g.choices_per_prompt, {u.prompt_tokens, u.completion_tokens, u.cached_tokens});
    if (!g.echo.empty()) u.text = g.echo[i] + u.text;
    Choice c;
    int tool_calls = 0;
    if (g.chat_output.any()) {
      ChatOutputParser parser(g.chat_output);
      c.answer = parser.push(u.text);
      c.answer.append(parser.finish());
      tool_calls = parser.tool_calls();
    } else {
      c.answer.content = std::move(u.text);
    }
    c.token_ids = std::move(u.token_ids);
    c.logprobs = std::move(u.logprobs);
    c.finish_reason = finish_reason_for(u.finish_reason, tool_calls);
    choices.push_back(std::move(c));
  }
  auto body = std::make_shared<std::string>(
      full_response(g.header, choices, usage).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  res.set_content_provider(
      body->size(), "application/json",
      [body](size_t offset, size_t length, httplib::DataSink& sink) {
        return sink.write(body->data() + offset, length);
      },
      releaser(g.streams, std::move(g.on_written)));
}

void respond_streaming(httplib::Response& res, GenerationResponse g) {
  struct ChoiceState {
    std::shared_ptr<RequestStream> stream;
    std::optional<ChatOutputParser> parser;  // chat answers parsed for reasoning or tool calls
    std::string echo;                        // completions' echo: sent before the choice's first text
    bool first = true;
    bool finished = false;
    size_t text_offset = 0;  // completions' logprobs: characters of the token strings sent so far
    int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;  // when finished
    int prompt_tokens_sent = 0;  // the prompt's tokens, known from the start (continuous usage)
    int generated = 0;           // tokens received so far
  };
  struct State {
    ResponseHeader header;
    Streams streams;
    std::vector<ChoiceState> choices;
    bool include_usage = false;
    int choices_per_prompt = 1;
    bool continuous_usage = false;
    GoneWatch watch;
    bool done = false;

    // The SSE events of choice i's update u.
    std::string events(int i, StreamUpdate& u) {
      ChoiceState& c = choices[i];
      std::string out;
      AnswerParts piece;
      if (c.parser) {
        piece = c.parser->push(u.text);
        if (u.finished) piece.append(c.parser->finish());
      } else {
        piece.content = std::exchange(c.echo, {}) + u.text;
      }
      // A step whose text is all held back (a stop string's or a tag's possible start, an incomplete
      // character) sends nothing, unless its token ids are asked for.
      const bool new_ids = header.return_token_ids && !u.token_ids.empty();
      const bool new_logprobs = header.logprobs && !u.logprobs.empty();
      c.generated += static_cast<int>(u.token_ids.size());
      if (u.finished) {
        c.prompt_tokens = u.prompt_tokens, c.completion_tokens = u.completion_tokens;
        c.cached_tokens = u.cached_tokens;
      }
      if (!piece.empty() || new_ids || new_logprobs || c.first) {
        out += event(
            i, stream_chunk(header, i, piece, u.token_ids, c.first, std::nullopt, u.logprobs, c.text_offset));
        for (const TokenLogprob& t : u.logprobs) c.text_offset += completion_text_length(t);
      }
      c.first = false;
      if (u.finished) {
        const int tool_calls = c.parser ? c.parser->tool_calls() : 0;
        out +=
            event(i, stream_chunk(header, i, {}, {}, false, finish_reason_for(u.finish_reason, tool_calls)));
        c.finished = true;
      }
      return out;
    }

    // A chunk of choice i as an event, with its usage so far where every chunk carries it.
    std::string event(int i, nlohmann::ordered_json chunk) const {
      if (continuous_usage) {
        const ChoiceState& c = choices[i];
        if (c.finished) {
          chunk["usage"] = usage_json(Usage{c.prompt_tokens, c.completion_tokens, c.cached_tokens});
        } else {  // what is known so far (the cached share comes with the finish)
          chunk["usage"] = {{"prompt_tokens", c.prompt_tokens_sent},
                            {"completion_tokens", c.generated},
                            {"total_tokens", c.prompt_tokens_sent + c.generated}};
        }
      }
      return sse_event(chunk);
    }
  };
  auto state = std::make_shared<State>();
  state->header = g.header;
  state->streams = g.streams;
  state->include_usage = g.include_usage;
  state->choices_per_prompt = std::max(g.choices_per_prompt, 1);
  state->continuous_usage = g.continuous_usage;
  state->watch.client_gone = std::move(g.client_gone);
  for (size_t i = 0; i < g.streams.size(); ++i) {
    ChoiceState c;
    c.stream = g.streams[i];
    if (!g.echo.empty()) c.echo = g.echo[i];
    if (i < g.prompt_tokens.size()) c.prompt_tokens_sent = g.prompt_tokens[i];
    if (g.chat_output.any()) c.parser.emplace(g.chat_output);
    state->choices.push_back(std::move(c));
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [state](size_t, httplib::DataSink& sink) {
        if (state->done) {
          sink.done();
          return true;
        }
        std::string out;
        if (state->choices.size() > 1 && state->choices[0].first) {
          // Every choice's first chunk (the role), in index order, before any text: clients build their
          // choices list by index as chunks come (the openai SDK's stream helper requires it).
          for (size_t i = 0; i < state->choices.size(); ++i) {
            out += state->event(static_cast<int>(i),
                                stream_chunk(state->header, static_cast<int>(i), {}, {}, true, std::nullopt));
            state->choices[i].first = false;
          }
        }
        bool waited = false, failed = false;
        for (size_t i = 0; i < state->choices.size() && !failed; ++i) {
          ChoiceState& c = state->choices[i];
          if (c.finished) continue;
          StreamUpdate u;  // the first unfinished choice waits; the others are only looked at
          const auto wait = waited ? std::chrono::milliseconds(0)
                                   : (state->choices.size() > 1 ? kChoicePoll : kPollInterval);
          waited = true;
          if (!c.stream->next(u, wait)) continue;
          if (!u.error.empty()) {
            out += sse_event(engine_error(u));
            failed = true;
            break;
          }
          out += state->events(static_cast<int>(i), u);
        }
        const bool all_finished = failed || std::all_of(state->choices.begin(), state->choices.end(),
                                                        [](const ChoiceState& c) { return c.finished; });
        if (all_finished) {
          if (!failed && state->include_usage) {
            Usage usage{0, 0, 0};
            for (size_t i = 0; i < state->choices.size(); ++i) {
              const ChoiceState& c = state->choices[i];
              add_choice_usage(usage, i, state->choices_per_prompt,
                               {c.prompt_tokens, c.completion_tokens, c.cached_tokens});
            }
            out += sse_event(usage_chunk(state->header, usage));
          }
          out += "data: [DONE]\n\n";
        }
        // Nothing to send is no write (an empty chunk would end the chunked body); a client seen gone then
        // is dropped.
        if (out.empty()) return !state->watch.gone(state->streams);
        if (!sink.write(out.data(), out.size())) {
          cancel_all(state->streams);
          return false;
        }
        if (all_finished) {
          if (failed) cancel_all(state->streams);
          state->done = true;
          sink.done();
        }
        return true;
      },
      releaser(g.streams, std::move(g.on_written)));
}

}  // namespace tpserve::serve
