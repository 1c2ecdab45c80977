#include "runtime/serve/generation_response.h"

#include <httplib.h>

#include <chrono>
#include <functional>
#include <optional>

#include "runtime/serve/api_error.h"

namespace tpserve::serve {
namespace {

constexpr std::chrono::milliseconds kPollInterval{200};

nlohmann::ordered_json engine_error(const std::string& message) {
  return ApiError(500, message, "", "engine_error").body();
}

// Calls on_written when the response object goes away (httplib destroys it after writing, or on failure).
std::function<void(bool)> releaser(std::shared_ptr<RequestStream> stream, std::function<void()> on_written) {
  return [stream = std::move(stream), on_written = std::move(on_written)](bool success) {
    if (!success) stream->cancel();
    if (on_written) on_written();
  };
}

// The finish reason a client sees: "tool_calls" where the answer ended by itself with tool calls made.
std::string finish_reason_for(const std::string& engine_reason, int tool_calls) {
  return tool_calls > 0 && engine_reason == "stop" ? "tool_calls" : engine_reason;
}

}  // namespace

void respond_whole(httplib::Response& res, GenerationResponse g) {
  StreamUpdate all;
  auto next_check = std::chrono::steady_clock::now() + kPollInterval;
  while (!all.finished) {
    StreamUpdate u;
    if (g.stream->next(u, kPollInterval)) all.merge(std::move(u));
    if (g.client_gone && !g.stream->cancelled() && std::chrono::steady_clock::now() >= next_check) {
      if (g.client_gone()) g.stream->cancel();  // nobody will read the answer: free the sequence now
      next_check = std::chrono::steady_clock::now() + kPollInterval;
    }
  }
  if (!all.error.empty()) {
    // The body set directly: an error status with a content provider (and so an empty body) would have the
    // server's error handler write its generic body over it.
    res.status = 500;
    res.set_content(engine_error(all.error).dump(), "application/json");
    if (g.on_written) g.on_written();  // the request is over; nothing waits on the write
    return;
  }
  const Usage usage{all.prompt_tokens, all.completion_tokens};
  AnswerParts answer;
  int tool_calls = 0;
  if (g.chat_output.any()) {
    ChatOutputParser parser(g.chat_output);
    answer = parser.push(all.text);
    answer.append(parser.finish());
    tool_calls = parser.tool_calls();
  } else {
    answer.content = std::move(all.text);
  }
  std::string body =
      full_response(g.header, answer, all.token_ids, finish_reason_for(all.finish_reason, tool_calls), usage)
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto shared = std::make_shared<std::string>(std::move(body));
  res.set_content_provider(
      shared->size(), "application/json",
      [shared](size_t offset, size_t length, httplib::DataSink& sink) {
        return sink.write(shared->data() + offset, length);
      },
      releaser(g.stream, std::move(g.on_written)));
}

void respond_streaming(httplib::Response& res, GenerationResponse g) {
  struct State {
    ResponseHeader header;
    std::shared_ptr<RequestStream> stream;
    bool include_usage;
    std::optional<ChatOutputParser> parser;  // chat answers parsed for reasoning or tool calls
    std::function<bool()> client_gone;
    std::chrono::steady_clock::time_point next_check;
    bool first = true;
    bool done = false;
    // On a turn that writes nothing (no step yet, or its text held back), whether the client has gone: a
    // write would tell, but none may come for a while (a queued request, a long tool call being held).
    bool gone_while_quiet() {
      const auto now = std::chrono::steady_clock::now();
      if (!client_gone || now < next_check) return false;
      next_check = now + kPollInterval;
      if (!client_gone()) return false;
      stream->cancel();
      return true;
    }
  };
  auto state = std::make_shared<State>(State{g.header, g.stream, g.include_usage, std::nullopt,
                                             std::move(g.client_gone),
                                             std::chrono::steady_clock::now() + kPollInterval});
  if (g.chat_output.any()) state->parser.emplace(g.chat_output);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [state](size_t, httplib::DataSink& sink) {
        if (state->done) {
          sink.done();
          return true;
        }
        StreamUpdate u;
        if (!state->stream->next(u, kPollInterval)) return !state->gone_while_quiet();  // called again
        std::string out;
        if (!u.error.empty()) {
          out += sse_event(engine_error(u.error));
        } else {
          AnswerParts piece;
          if (state->parser) {
            piece = state->parser->push(u.text);
            if (u.finished) piece.append(state->parser->finish());
          } else {
            piece.content = std::move(u.text);
          }
          // A step whose text is all held back (a stop string's or a tag's possible start, an incomplete
          // character) sends nothing, unless its token ids are asked for.
          const bool new_ids = state->header.return_token_ids && !u.token_ids.empty();
          if (!piece.empty() || new_ids || state->first)
            out += sse_event(stream_chunk(state->header, piece, u.token_ids, state->first, std::nullopt));
          state->first = false;
          if (u.finished) {
            const int tool_calls = state->parser ? state->parser->tool_calls() : 0;
            out += sse_event(
                stream_chunk(state->header, {}, {}, false, finish_reason_for(u.finish_reason, tool_calls)));
            if (state->include_usage)
              out += sse_event(usage_chunk(state->header, Usage{u.prompt_tokens, u.completion_tokens}));
          }
        }
        if (u.finished) out += "data: [DONE]\n\n";
        // Nothing to send is no write: an empty chunk would end the chunked body.
        if (out.empty()) return !state->gone_while_quiet();
        if (!sink.write(out.data(), out.size())) {
          state->stream->cancel();
          return false;
        }
        if (u.finished) {
          state->done = true;
          sink.done();
        }
        return true;
      },
      releaser(g.stream, std::move(g.on_written)));
}

}  // namespace tpserve::serve
