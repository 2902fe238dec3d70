'use strict';
// Consumes with ali-ons' push Consumer (clustering) and prints one JSON line per delivery.
//
//   node consumer.js --namesrv HOST:PORT --group GROUP --topic TOPIC [--expr 'TagA || TagB']
//                    [--sql 'a > 5'] [--count N] [--timeout-ms MS] [--fail-keys k1,k2] [--linger]
//                    [--fail-times N] [--max-reconsume N] [--from-last] [--until-eof]
//                    [--no-post-subscription]
//
// Output: {"event": "message", msgId, topic, tags, keys, body, reconsumeTimes, properties, queueId,
// queueOffset} per delivery; {"event": "done", "received": N} once N messages were consumed
// successfully, or {"event": "timeout", ...} (exit 3) if the time ran out first. A message whose key
// is in --fail-keys makes the handler throw on its first --fail-times (default 1) deliveries, so
// ali-ons sends it back to the broker's retry topic (or, past --max-reconsume, to the DLQ). With --linger the consumer persists its offsets, prints
// {"event": "persisted"} and stays connected until its stdin closes (for operator views). With
// --until-eof it consumes until its stdin closes, then prints {"event": "stopped"} (exit 0).

const { Consumer } = require('ali-ons');
const ConsumeFromWhere = require('ali-ons/lib/consumer/consume_from_where');
const { parseArgs, clientOptions, emit } = require('./common');

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const expected = args['until-eof'] ? Infinity : Number(args.count || 1);
  const timeoutMs = Number(args['timeout-ms'] || 30000);
  const failKeys = new Set(args['fail-keys'] ? String(args['fail-keys']).split(',') : []);
  const failTimes = Number(args['fail-times'] || 1);
  const consumer = new Consumer({
    ...clientOptions(args),
    consumerGroup: args.group,
    consumeFromWhere: args['from-last']
      ? ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
      : ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    brokerSuspendMaxTimeMillis: Number(args['suspend-ms'] || 15000),
    maxReconsumeTimes: Number(args['max-reconsume'] || 16),
    // false: pulls carry no subscription, the broker filters by the one from the heartbeat.
    postSubscriptionWhenPull: !args['no-post-subscription'],
  });
  consumer.on('error', err => console.error('[consumer error]', err.message));

  let received = 0;
  let finish;
  const finished = new Promise(resolve => { finish = resolve; });
  const failures = new Map();
  const expression = args.sql ? { expressionType: 'SQL92', subString: args.sql } : args.expr || '*';
  consumer.subscribe(args.topic, expression, async msg => {
    const keys = msg.keys || '';
    emit({
      event: 'message',
      msgId: msg.msgId,
      topic: msg.topic,
      tags: msg.tags || null,
      keys,
      body: msg.body.toString('utf8'),
      reconsumeTimes: msg.reconsumeTimes,
      queueId: msg.queueId,
      queueOffset: Number(msg.queueOffset),
      // ali-ons splits the trailing property separator into an empty name: drop it.
      properties: Object.fromEntries(Object.entries(msg.properties).filter(([name]) => name)),
    });
    const failKey = keys.split(' ').find(key => failKeys.has(key));
    if (failKey && (failures.get(failKey) || 0) < failTimes) {
      failures.set(failKey, (failures.get(failKey) || 0) + 1);
      throw new Error(`compat test: failing ${failKey} on purpose`);
    }
    received++;
    if (received >= expected) {
      finish('done');
    }
  });

  // After each rebalance that changed this client's share: {"event": "queues", "queues": [ids]}.
  consumer.on(`topic_${args.topic}_queue_changed`, () => {
    const queues = Array.from(consumer.processQueueTable.values())
      .map(item => item.messageQueue)
      .filter(mq => mq.topic === args.topic)
      .map(mq => Number(mq.queueId))
      .sort();
    emit({ event: 'queues', queues });
  });

  if (args['until-eof']) {
    process.stdin.on('end', () => finish('stopped'));
    process.stdin.resume();
  }
  const timer = setTimeout(() => finish('timeout'), timeoutMs);
  const outcome = await finished;
  clearTimeout(timer);
  emit({ event: outcome, received });
  if (args.linger && outcome === 'done') {
    // Let the consume loop commit the last batch, then push offsets to the broker.
    await new Promise(resolve => setTimeout(resolve, 200));
    await consumer.persistConsumerOffset();
    emit({ event: 'persisted' });
    await new Promise(resolve => {
      process.stdin.on('end', resolve);
      process.stdin.on('close', resolve);
      process.stdin.resume();
    });
  }
  await consumer.close();
  process.exit(outcome === 'timeout' ? 3 : 0);
}

main().catch(err => {
  console.error(err);
  process.exit(2);
});
